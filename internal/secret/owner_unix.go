//go:build unix

package secret

import (
	"os"
	"syscall"
)

// FileOwner is the user id owning fi, and false where the system does not
// tell.
func FileOwner(fi os.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
