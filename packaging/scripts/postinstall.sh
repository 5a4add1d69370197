#!/bin/sh
# anarchon postinstall (deb postinst / rpm %post).
#   deb: $1 = configure (abort-* on error unwinding), $2 = the old version on
#        an upgrade, empty on a first install.
#   rpm: $1 = 1 on a first install, 2 or more on an upgrade.
# The service is neither enabled nor started on a first install: configure the
# store first, then `systemctl enable --now anarchond`. An upgrade restarts it
# if it was running (a restart drains running jobs first, see
# docs/operating.md).
set -e

upgrade=no
case "$1" in
configure)
	if [ -n "$2" ]; then upgrade=yes; fi
	;;
abort-*)
	exit 0
	;;
[0-9]*)
	if [ "$1" -ge 2 ]; then upgrade=yes; fi
	;;
esac

# The state directory (the SQLite store) belongs to the service's user.
if [ -d /var/lib/anarchon ]; then
	chown anarchon:anarchon /var/lib/anarchon
	chmod 0750 /var/lib/anarchon
fi

# Only when systemd is the running init: not in a container or a chroot.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ "$upgrade" = yes ]; then
		systemctl try-restart anarchond.service >/dev/null 2>&1 || true
	fi
fi
exit 0
