package config

import "path/filepath"

// anchor is path relative to the crontab's directory rather than to the
// working directory (store files through store.Section.Path, and
// stateDir): every command given the same --config (anarchond status from
// a shell, the daemon under systemd) then opens the same files. A crontab
// named without a directory (and one parsed from memory) leaves them as
// written.
func (p *parser) anchor(path string) string {
	dir := filepath.Dir(p.file)
	if path == "" || filepath.IsAbs(path) || dir == "." {
		return path
	}
	return filepath.Join(dir, path)
}
