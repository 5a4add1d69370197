#!/bin/sh
# anarchon preinstall (deb preinst / rpm %pre): create the system group and
# user "anarchon" the service runs as. Idempotent: an existing user or group
# is kept as it is (an admin may have created it with a fixed uid).
set -e

if ! getent group anarchon >/dev/null 2>&1; then
	groupadd --system anarchon
fi
if ! getent passwd anarchon >/dev/null 2>&1; then
	nologin=/usr/sbin/nologin
	[ -x "$nologin" ] || nologin=/sbin/nologin
	useradd --system --gid anarchon --home-dir /var/lib/anarchon --no-create-home \
		--shell "$nologin" --comment "anarchon cron daemon" anarchon
fi
exit 0
