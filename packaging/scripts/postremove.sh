#!/bin/sh
# anarchon postremove (deb postrm / rpm %postun).
#   deb: $1 = remove, purge, upgrade, ...; rpm: $1 = 0 on a removal, 1 or
#        more on an upgrade.
# On purge (deb only: rpm has none), the state directory /var/lib/anarchon
# (the SQLite store: run history and leases) is deleted. dpkg deletes the
# configuration files itself. The system user and group "anarchon" are kept,
# as Debian does for system users: files outside the package (a job's output,
# say) may still be owned by its uid, and a new user must not inherit them.
# Remove them by hand with `userdel anarchon` if you wish.
set -e

case "$1" in
purge)
	rm -rf /var/lib/anarchon
	;;
esac

case "$1" in
remove | purge | 0)
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
