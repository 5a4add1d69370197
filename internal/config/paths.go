package config

import "path/filepath"

// anchorPaths makes the store's relative file paths (backend.sqlite.path,
// each passwordFile, each tls file) relative to the crontab's directory
// rather than to the working directory: every command given the same
// --config (anarchond status from a shell, the daemon under systemd) then
// opens the same files. A crontab named without a directory (and one
// parsed from memory) leaves them as written.
func (p *parser) anchorPaths(b *Backend) {
	for _, f := range []*string{
		&b.SQLite.Path,
		&b.Postgres.PasswordFile, &b.Redis.PasswordFile, &b.RabbitMQ.PasswordFile, &b.NATS.PasswordFile,
		&b.Postgres.TLS.CAFile, &b.Postgres.TLS.CertFile, &b.Postgres.TLS.KeyFile,
		&b.Redis.TLS.CAFile, &b.Redis.TLS.CertFile, &b.Redis.TLS.KeyFile,
		&b.RabbitMQ.TLS.CAFile, &b.RabbitMQ.TLS.CertFile, &b.RabbitMQ.TLS.KeyFile,
		&b.NATS.TLS.CAFile, &b.NATS.TLS.CertFile, &b.NATS.TLS.KeyFile,
	} {
		*f = p.anchor(*f)
	}
}

// anchor is path relative to the crontab's directory, as anchorPaths
// says (stateDir too).
func (p *parser) anchor(path string) string {
	dir := filepath.Dir(p.file)
	if path == "" || filepath.IsAbs(path) || dir == "." {
		return path
	}
	return filepath.Join(dir, path)
}
