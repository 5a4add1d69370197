package sqliteclaim

// Schema migrations, applied in order by migrate, each exactly once per
// database file. Migration i (0-based) brings the file to version i+1; the
// versions applied are recorded in schema_migrations. Never edit a released
// migration: append a new one.
//
// Times are integer milliseconds since the Unix epoch in store time (see
// nowMs). A run's token and instance are those of its current attempt.
var migrations = []string{
	// 1: runs, their history, and the indexes the claim and status need.
	`CREATE TABLE runs (
		job         TEXT    NOT NULL,
		slot        INTEGER NOT NULL,            -- ms since the Unix epoch
		status      TEXT    NOT NULL,            -- running | succeeded | failed | timeout | interrupted
		attempt     INTEGER NOT NULL,
		instance    TEXT    NOT NULL,
		token       TEXT    NOT NULL,
		started_at  INTEGER NOT NULL,            -- store time the current attempt was granted
		finished_at INTEGER,                     -- store time; NULL while running
		lease_until INTEGER NOT NULL,            -- store time
		exit_code   INTEGER,                     -- NULL while running or when interrupted
		output_tail TEXT    NOT NULL DEFAULT '',
		PRIMARY KEY (job, slot)
	);
	-- The overlap rule's question, "is another run of this job live?", reads
	-- only running runs: a partial index keeps it small however long the
	-- history of finished runs grows.
	CREATE INDEX runs_live ON runs (job, lease_until) WHERE status = 'running';
	-- status (every job, newest slot first) and Prune (slot < cutoff).
	CREATE INDEX runs_slot ON runs (slot);
	CREATE TABLE run_history (
		id       INTEGER PRIMARY KEY,
		job      TEXT    NOT NULL,
		slot     INTEGER NOT NULL,
		attempt  INTEGER NOT NULL,
		token    TEXT    NOT NULL,
		instance TEXT    NOT NULL,
		event    TEXT    NOT NULL,               -- claimed | takeover | finished | interrupted | released
		at       INTEGER NOT NULL                -- store time
	);
	CREATE INDEX run_history_run ON run_history (job, slot);`,
	// 2: notes, the outcomes of slots no attempt ran (claim.Recorder). A
	// note is a row of runs with status skipped | missed | unknown,
	// attempt 0, token '', started_at and lease_until 0 (read back as zero
	// times), finished_at the store time it was recorded, and these two
	// columns: why the slot was not run, and for a slot skipped for overlap
	// the slot of the run that held it (0: none or not known). Claims,
	// results and older binaries leave them at their defaults. The runs_live
	// index and the overlap question read running rows only, so notes never
	// count as live.
	`ALTER TABLE runs ADD COLUMN reason TEXT NOT NULL DEFAULT '';
	ALTER TABLE runs ADD COLUMN held_by INTEGER NOT NULL DEFAULT 0;`,
	// 3: the jobs' control records (claim.Controller, control.go): one
	// row per job an operator paused or resumed, written whole by one
	// compare-and-set statement on version.
	controlV3,
	// 4: the control records' triggers (control.go): one column with a
	// constant default, so the records of version 3 read as having none.
	controlV4,
	// 5: the instances' heartbeat records (claim.Registry,
	// instances.go): one row per instance, upserted by each beat.
	instancesV5,
}

// SQL of the migration machinery.
const (
	createMigrationsSQL = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`
	currentVersionSQL = `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`
	recordVersionSQL  = `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ` + nowMs + `)`
)
