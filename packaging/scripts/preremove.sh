#!/bin/sh
# anarchon preremove (deb prerm / rpm %preun).
#   deb: $1 = remove on a removal, upgrade on an upgrade (then the new
#        package's postinst restarts the service).
#   rpm: $1 = 0 on a removal, 1 or more on an upgrade.
# On a removal: stop the service (it drains its jobs for shutdownGraceMs) and
# disable it, so no dangling symlink is left.
set -e

remove=no
case "$1" in
remove | 0) remove=yes ;;
esac

if [ "$remove" = yes ]; then
	if [ -d /run/systemd/system ]; then
		systemctl stop anarchond.service >/dev/null 2>&1 || true
	fi
	if command -v systemctl >/dev/null 2>&1; then
		systemctl --no-reload disable anarchond.service >/dev/null 2>&1 || true
	fi
fi
exit 0
