// Package secret keeps the stores' passwords out of what anarchond shows.
// It reads the password files the stores take (backend.*.passwordFile),
// refusing one that others than its owner (and, for a file root owns, the
// daemon's group) can read; it hides the passwords of URLs and DSNs in text
// (Redact) and finds them (Find); and it hides every password a store knows
// in its errors (Scrub) and log lines (Hide), one way for every store.
package secret

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSize bounds a password file: a password is short, and a larger file is
// a mistake (a wrong path) better reported than read.
const maxSize = 64 << 10

// ReadFile returns the password held in the file at path: its content without
// its trailing line breaks (every \r and \n at its end). what names the
// setting in errors ("backend.postgres.passwordFile"); the errors name the
// file, never its content.
//
// A file that others can read, or write, is refused, as PostgreSQL does for
// its server key: one owned by root may be 0640 (the daemon reads it through
// its group, as in root:anarchon), any other at most 0600.
func ReadFile(path, what string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		// The *PathError names the file, never its content.
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	if err := checkMode(path, what, fi); err != nil {
		return "", err
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	if len(raw) > maxSize {
		return "", fmt.Errorf("read %s: %s is larger than %d KiB; a password file holds one password", what, path, maxSize>>10)
	}
	pw := strings.TrimRight(string(raw), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("read %s: %s is empty", what, path)
	}
	return pw, nil
}

// checkMode refuses a password file others can read or write.
func checkMode(path, what string, fi os.FileInfo) error {
	uid, ok := FileOwner(fi)
	if !ok {
		return nil // no Unix owner and modes to check
	}
	allowed := os.FileMode(0o600)
	if uid == 0 {
		allowed = 0o640
	}
	perm := fi.Mode().Perm()
	if perm&^allowed&0o077 == 0 {
		return nil
	}
	return fmt.Errorf("%s %s is readable or writable by group or others (mode %04o), and holds a password; fix with chmod 600 %s "+
		"(or, for a file root owns that the daemon reads through its group, chmod 640 %s)", what, path, perm, path, path)
}
