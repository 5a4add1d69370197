//go:build !linux

package supervise

import (
	"fmt"
	"os"
)

// Main is the supervisor; it needs Linux (the parent-death signal).
func Main(argv []string) int {
	fmt.Fprintln(os.Stderr, prefix+"supervising a job needs Linux (parent-death signal)")
	return ExitMisuse
}
