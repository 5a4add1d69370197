package config

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/anarchon/anarchon/internal/secret"
)

// maxLinks bounds the symbolic links followed while checking a crontab's
// path, as the kernel's ELOOP does.
const maxLinks = 40

// trustCheck decides whether a crontab can be trusted, as cron and sshd's
// StrictModes do: the commands it holds run as the daemon's user, so nobody
// else may be able to change it. The file, every directory above it and
// every symbolic link on the way (each link and its target) must be owned by
// root or by the daemon's own user, and not be writable by group or others.
// A directory with the sticky bit (such as /tmp) may be writable by others:
// there, nobody can replace an entry they do not own.
type trustCheck struct {
	given    string   // the path as given, naming the file when no link led to it
	uid      int      // the daemon's effective user id
	problems []string // one sentence per untrusted path, with its fix
	links    int
	final    os.FileInfo // what path named, after its links
}

// checkTrust walks path from the root directory, following its symbolic
// links, and returns the problems found, and the file the path names.
func checkTrust(path string) (problems []string, final os.FileInfo, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	c := &trustCheck{given: path, uid: os.Geteuid()}
	root := string(filepath.Separator)
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, nil, err
	}
	c.checkDir(root, fi)
	if err := c.walk(root, splitPath(abs)); err != nil {
		return nil, nil, err
	}
	return c.problems, c.final, nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == filepath.Separator })
}

// walk resolves the components rest below the directory dir (which holds no
// symbolic link) one at a time, checking each.
func (c *trustCheck) walk(dir string, rest []string) error {
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".":
			continue
		case "..":
			dir = filepath.Dir(dir)
			continue
		}
		next := filepath.Join(dir, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if c.links++; c.links > maxLinks {
				return fmt.Errorf("%s: too many levels of symbolic links", next)
			}
			c.checkOwner(next, fi, "symbolic link")
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				dir = string(filepath.Separator)
			}
			rest = append(splitPath(target), rest...)
			continue
		}
		if len(rest) == 0 {
			if c.links == 0 {
				next = c.given
			}
			c.checkOwner(next, fi, "file")
			if fi.Mode().Perm()&insecureBits != 0 {
				c.problems = append(c.problems, fmt.Sprintf(
					"%s is writable by group or others (mode %04o); fix with chmod go-w %s",
					c.label("file", next), fi.Mode().Perm(), next))
			}
			c.final = fi
			return nil
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", next)
		}
		c.checkDir(next, fi)
		dir = next
	}
	c.final, _ = os.Stat(dir) // the path named a directory: Load refuses it
	return nil
}

// checkDir checks a directory on the crontab's path.
func (c *trustCheck) checkDir(dir string, fi os.FileInfo) {
	c.checkOwner(dir, fi, "directory")
	perm := fi.Mode().Perm()
	if perm&insecureBits != 0 && fi.Mode()&os.ModeSticky == 0 {
		c.problems = append(c.problems, fmt.Sprintf(
			"directory %s is writable by group or others without the sticky bit (mode %04o), so they can replace the crontab; fix with chmod go-w %s",
			dir, perm, dir))
	}
}

// checkOwner reports p when neither root nor the daemon's user owns it.
func (c *trustCheck) checkOwner(p string, fi os.FileInfo, kind string) {
	uid, ok := secret.FileOwner(fi)
	if !ok || uid == 0 || uid == c.uid {
		return
	}
	chown := "chown root"
	if fi.Mode()&os.ModeSymlink != 0 {
		chown = "chown -h root" // the link, not its target
	}
	c.problems = append(c.problems, fmt.Sprintf(
		"%s is owned by %s, not by root or the daemon's user (%s), and its owner can change the commands the daemon runs; fix with %s %s",
		c.label(kind, p), userName(uid), userName(c.uid), chown, p))
}

// label names p in a problem: "file" alone for the crontab as given (the
// problem's place names it already), else kind and path.
func (c *trustCheck) label(kind, p string) string {
	if p == c.given {
		return kind
	}
	return kind + " " + p
}

// userName is "name (uid N)", or "uid N" for a uid with no account.
func userName(uid int) string {
	id := strconv.Itoa(uid)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return "uid " + id
}
