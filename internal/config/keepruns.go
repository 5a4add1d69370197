package config

// checkKeepRuns refuses keepRuns on a claim-only backend: its store
// forgets runs by its own retention and has no way to delete a job's
// older runs, so the bound would silently not hold. Reported once where
// it is set (a job, or defaults).
func (p *parser) checkKeepRuns(b *Backend, infos []jobInfo) {
	if b.Store == nil || b.Leases() {
		return
	}
	seen := map[*value]bool{}
	for _, in := range infos {
		k := in.pol.keepRuns
		if k.at == nil || seen[k.at] {
			continue
		}
		seen[k.at] = true
		p.errorf(k.at, "keepRuns cannot be enforced on backend %s: a claim-only store forgets its runs by its own retention and cannot delete a job's older runs; remove keepRuns, or use a backend that keeps leases (docs/backends.md)", b.Describe())
	}
}
