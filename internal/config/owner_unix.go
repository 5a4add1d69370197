//go:build unix

package config

import (
	"os"
	"syscall"
)

// fileOwner is the user id owning fi.
func fileOwner(fi os.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
