package pgclaim

import "strings"

// Schema migrations, applied in order by migrate, each exactly once per
// table. Migration i (0-based) brings the table to version i+1; the versions
// applied are recorded in <table>_schema. Never edit a released migration:
// append a new one (a changed claim function is a new migration with
// CREATE OR REPLACE FUNCTION). The versions of the claim function share
// their unchanged parts as constants, or derive one from another; the text
// of each released migration is pinned by TestMigrationsReleased.
//
// The SQL is written with placeholders that names.expand replaces with the
// quoted, schema-qualified names of one table (see names):
//
//	{{runs}}     "s"."t"           one row per run (job, slot)
//	{{jobs}}     "s"."t_jobs"      one row per job: the per-job claim lock
//	{{history}}  "s"."t_history"   what happened to each run
//	{{claim}}    "s"."t_claim"     the claim function
//	{{live}}     "t_live"          index names (created in the table's schema)
//	{{slotidx}}  "t_slot_job"
//	{{histidx}}  "t_history_run"
//	{{statuscheck}}, {{attemptcheck}}  "t_status_check", "t_attempt_check":
//	             the names PostgreSQL gave the CHECK constraints of
//	             migration 1's status and attempt columns
//	{{now}}      store now in integer milliseconds (nowMs)
//
// Times are integer milliseconds since the Unix epoch in store time, as in
// the sqlite backend and the claim package's Slot: a run's times compare
// with its slot without conversion. For psql, to_timestamp(slot / 1000.0)
// shows one as a timestamp.
var migrations = []string{
	// 1: runs, the job lock rows, history, their indexes, and the claim
	// function.
	tablesV1 + claimV1,
	// 2: the claim answers from a plain read when the run is not contested
	// (the read before the transaction moves into the function: every claim
	// is one round trip), and the job's lock is an advisory lock, which
	// writes nothing, instead of an upsert of its {{jobs}} row. The table
	// stays, unused, so that instances of version 1 still running during an
	// upgrade keep working; they call this function too, by name.
	claimV2,
	// 3: a run is locked (FOR UPDATE) only where the claim writes it, a
	// takeover of an expired lease. Under the job's lock the run is read
	// plainly first: a claim that waited there while another instance won
	// the run answers running with nothing written. A row lock marks the
	// row, which gives the transaction an id, and the commit of a
	// transaction with an id waits for a WAL flush: with version 2 each of
	// the losers of a race flushed the WAL in turn, one after another.
	// The function also answers the run's holder (running, or done and not
	// interrupted), a new OUT column: hence DROP and CREATE. Instances of
	// version 2 still running during an upgrade name the four columns they
	// read, which the new function still has.
	claimV3,
	// 4: a run claimed ahead of its slot (claimAheadMs) is recorded as
	// started at its slot, not at the claim (its lease still runs from the
	// claim): version 3's function with that one change, derived from it
	// below so that the two cannot drift apart elsewhere.
	claimV4,
	// 5: notes, the outcomes of slots no attempt ran (claim.Recorder). A
	// note is a row of {{runs}} with status skipped | missed | unknown,
	// attempt 0, token '', started_at and lease_until 0 (read back as zero
	// times), finished_at the store time it was recorded, and two new
	// columns: why the slot was not run, and for a slot skipped for
	// overlap the slot of the run that held it (0: none or not known).
	// Both have constant defaults, so adding them rewrites no row, and
	// instances of version 4 still running during an upgrade (which name
	// their columns) keep working. The CHECK constraints admit the notes:
	// the new ones are looser than the old, which every row satisfies, and
	// one ALTER TABLE replaces them (one lock, one validating scan of a
	// table that Prune keeps short). The overlap question and the {{live}}
	// index read running rows only: a note is never live.
	notesV5 + claimV5,
	// 6: the jobs' control records (claim.Controller, control.go): one row
	// per job an operator paused or resumed, written whole by one
	// compare-and-set statement on version. A new table: instances of
	// version 5 still running during an upgrade never touch it.
	controlV6,
	// 7: the control records' triggers (control.go): one column with a
	// constant default, so adding it rewrites no row and the records of
	// version 6 read as having none; instances of version 6 still running
	// during an upgrade name their columns and keep working.
	controlV7,
	// 8: a run may end replaced (overlap: replace: the attempt stopped its
	// command at the job's next slot and recorded so, docs/spec.md#s3-1-replace).
	// The status CHECK is replaced by a looser one, which every row
	// satisfies; the claim function is unchanged (replace and queue are
	// decided as skip: the Go side sends p_overlap_skip for them).
	replacedV8,
	// 9: the instances' heartbeat records (claim.Registry,
	// instances.go): one row per instance, upserted by each beat. A new
	// table: instances of version 6 still running during an upgrade never
	// touch it.
	instancesV9,
}

// replacedV8 is migration 8: the status CHECK admits replaced.
const replacedV8 = `	ALTER TABLE {{runs}}
		DROP CONSTRAINT {{statuscheck}},
		ADD CONSTRAINT {{statuscheck}} CHECK (status IN ('running', 'succeeded', 'failed', 'timeout', 'interrupted',
			'replaced', 'skipped', 'missed', 'unknown'));
`

// notesV5 is the table change of migration 5.
const notesV5 = `	ALTER TABLE {{runs}}
		ADD COLUMN reason text NOT NULL DEFAULT '',
		ADD COLUMN held_by bigint NOT NULL DEFAULT 0,
		DROP CONSTRAINT {{statuscheck}},
		DROP CONSTRAINT {{attemptcheck}},
		ADD CONSTRAINT {{statuscheck}} CHECK (status IN ('running', 'succeeded', 'failed', 'timeout', 'interrupted',
			'skipped', 'missed', 'unknown')),
		ADD CONSTRAINT {{attemptcheck}} CHECK (CASE WHEN status IN ('skipped', 'missed', 'unknown')
			THEN attempt = 0 ELSE attempt >= 1 END);
`

// tablesV1 is the table part of migration 1.
const tablesV1 = `CREATE TABLE {{runs}} (
		job         text    NOT NULL,
		slot        bigint  NOT NULL,            -- ms since the Unix epoch
		status      text    NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'timeout', 'interrupted')),
		attempt     integer NOT NULL CHECK (attempt >= 1),
		instance    text    NOT NULL,
		token       text    NOT NULL,
		started_at  bigint  NOT NULL,            -- store time the current attempt was granted
		finished_at bigint,                      -- store time; NULL while running
		lease_until bigint  NOT NULL,            -- store time
		exit_code   integer,                     -- NULL while running or when interrupted
		output_tail text    NOT NULL DEFAULT '',
		PRIMARY KEY (job, slot)
	) WITH (fillfactor = 90);
	-- The overlap rule's question, "is another run of this job live?", reads
	-- only running runs of one job. lease_until is deliberately not indexed:
	-- a renewal then changes no indexed column, so it is a HOT update (the
	-- fillfactor leaves room on the page) and heartbeats add no index entries.
	CREATE INDEX {{live}} ON {{runs}} (job) WHERE status = 'running';
	-- status over every job (newest slot first) and Prune (slot < cutoff).
	CREATE INDEX {{slotidx}} ON {{runs}} (slot, job);

	-- One row per job, upserted by every claim transaction that may write:
	-- its row lock, held to COMMIT, serialises the claims of one job.
	CREATE TABLE {{jobs}} (
		job text PRIMARY KEY
	);

	CREATE TABLE {{history}} (
		id       bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		job      text    NOT NULL,
		slot     bigint  NOT NULL,
		attempt  integer NOT NULL,
		token    text    NOT NULL,
		instance text    NOT NULL,
		event    text    NOT NULL,               -- claimed | takeover | interrupted | finished | released
		at       bigint  NOT NULL                -- store time
	);
	CREATE INDEX {{histidx}} ON {{history}} (job, slot);

	`

// claimV1 is migration 1's function. claimV2 and claimV3 share its
// parameters and variables, its decision on an absent run (claimFirst) and
// its takeover of an expired lease (claimTakeover).
const claimV1 = `-- The decision table of docs/spec.md#s3-1, the same as claim.Decide, in
	-- one call: the whole claim is one round trip (SELECT * FROM claim(...),
	-- run by PostgreSQL in an implicit transaction).
	--
	-- VOLATILE matters: each statement of a VOLATILE function takes a fresh
	-- snapshot (under READ COMMITTED, which the backend sets on its
	-- sessions), so a claim that waited on the job's lock row reads what the
	-- claim before it committed.
	CREATE FUNCTION {{claim}}` + claimParams + claimVars + lockRowV1 + `
		-- 2. The run, locked against a concurrent renew, finish or release.
		SELECT * INTO cur FROM {{runs}} AS r WHERE r.job = p_job AND r.slot = p_slot FOR UPDATE;
		found_run := FOUND;

		-- 3. Store now, read once the locks are held: clock_timestamp(), not
		-- now(), which is the transaction's start and may be stale after the
		-- wait for the lock.
		now_ms := {{now}};
		store_now := now_ms;
		attempt := 0;

` + claimFirst + `		-- My own claim, re-sent: won, whatever the lease says.
		IF cur.status = 'running' AND cur.token = p_token THEN
			outcome := 'won';
			attempt := cur.attempt;
			lease_until := cur.lease_until;
			RETURN;
		END IF;

		IF cur.status <> 'running' THEN
			outcome := 'done';
			RETURN;
		END IF;

		IF cur.lease_until >= now_ms THEN
			outcome := 'running';
			attempt := cur.attempt;
			lease_until := cur.lease_until;
			RETURN;
		END IF;

` + claimTakeover

// claimParams are the claim function's parameters and the OUT columns of
// versions 1 and 2 (version 3 adds holder).
const claimParams = `(
		p_job text, p_slot bigint, p_token text, p_instance text,
		p_max_late_ms bigint, p_lease_ms bigint, p_max_attempts integer, p_overlap_skip boolean,
		OUT outcome text, OUT attempt integer, OUT store_now bigint, OUT lease_until bigint`

// claimVars closes the parameters and opens the function's body.
const claimVars = `)
	LANGUAGE plpgsql VOLATILE AS $claim$
	#variable_conflict use_column
	DECLARE
		cur        {{runs}}%ROWTYPE;
		found_run  boolean;
		now_ms     bigint;
		other_live boolean := false;
	BEGIN
`

// lockRowV1 is version 1's lock of the job: an upsert of its row.
const lockRowV1 = `		-- 1. The job's lock row. ON CONFLICT DO UPDATE locks the existing
		-- row until COMMIT (a no-op update of an unchanged key is HOT): a
		-- second claim of the job waits here and then sees the first's row.
		INSERT INTO {{jobs}} AS j (job) VALUES (p_job)
			ON CONFLICT (job) DO UPDATE SET job = excluded.job;
`

// claimFirst decides a run absent under the job's lock: late, overlap, or
// its first attempt.
const claimFirst = `		IF NOT found_run THEN
			IF now_ms - p_slot > p_max_late_ms THEN
				outcome := 'late';
				RETURN;
			END IF;
			IF p_overlap_skip AND EXISTS (SELECT 1 FROM {{runs}} AS o
					WHERE o.job = p_job AND o.status = 'running' AND o.lease_until >= now_ms AND o.slot <> p_slot) THEN
				outcome := 'overlap';
				RETURN;
			END IF;
			INSERT INTO {{runs}} (job, slot, status, attempt, instance, token,
					started_at, finished_at, lease_until, exit_code, output_tail)
				VALUES (p_job, p_slot, 'running', 1, p_instance, p_token,
					now_ms, NULL, now_ms + p_lease_ms, NULL, '');
			INSERT INTO {{history}} (job, slot, attempt, token, instance, event, at)
				VALUES (p_job, p_slot, 1, p_token, p_instance, 'claimed', now_ms);
			outcome := 'won';
			attempt := 1;
			lease_until := now_ms + p_lease_ms;
			RETURN;
		END IF;

`

// claimTakeover decides an expired lease and ends the function.
const claimTakeover = `		-- The lease expired. Overlap also guards takeovers.
		IF p_overlap_skip THEN
			other_live := EXISTS (SELECT 1 FROM {{runs}} AS o
				WHERE o.job = p_job AND o.status = 'running' AND o.lease_until >= now_ms AND o.slot <> p_slot);
		END IF;
		IF cur.attempt >= p_max_attempts OR other_live THEN
			UPDATE {{runs}} AS r SET status = 'interrupted', finished_at = now_ms
				WHERE r.job = p_job AND r.slot = p_slot;
			INSERT INTO {{history}} (job, slot, attempt, token, instance, event, at)
				VALUES (p_job, p_slot, cur.attempt, cur.token, cur.instance, 'interrupted', now_ms);
			outcome := 'done';
			attempt := cur.attempt;
			RETURN;
		END IF;

		UPDATE {{runs}} AS r SET status = 'running', attempt = cur.attempt + 1,
				instance = p_instance, token = p_token, started_at = now_ms, finished_at = NULL,
				lease_until = now_ms + p_lease_ms, exit_code = NULL, output_tail = ''
			WHERE r.job = p_job AND r.slot = p_slot;
		INSERT INTO {{history}} (job, slot, attempt, token, instance, event, at)
			VALUES (p_job, p_slot, cur.attempt + 1, p_token, p_instance, 'takeover', now_ms);
		outcome := 'won';
		attempt := cur.attempt + 1;
		lease_until := now_ms + p_lease_ms;
	END
	$claim$;`

// claimV2 is migration 2: claimV1's function, replaced, with the read
// before the lock and the job's advisory lock in place of its lock row.
var claimV2 = "\t" + derive(claimV1, "CREATE FUNCTION",
	"CREATE FUNCTION", "CREATE OR REPLACE FUNCTION",
	lockRowV1, lockV2)

// lockV2 is version 2's read before the lock and lock of the job.
const lockV2 = `		-- 0. The read before the lock (docs/spec.md#s3-1): a run that is
		-- finished, held under a live lease, or my own re-sent claim is
		-- answered from a plain read, with no lock taken and nothing written,
		-- so its commit waits for no WAL flush. Only a claim that may write
		-- goes on.
		SELECT * INTO cur FROM {{runs}} AS r WHERE r.job = p_job AND r.slot = p_slot;
		IF FOUND THEN
			now_ms := {{now}};
			store_now := now_ms;
			attempt := cur.attempt;
			IF cur.status = 'running' AND cur.token = p_token THEN
				outcome := 'won';
				lease_until := cur.lease_until;
				RETURN;
			ELSIF cur.status <> 'running' THEN
				outcome := 'done';
				attempt := 0;
				RETURN;
			ELSIF cur.lease_until >= now_ms THEN
				outcome := 'running';
				lease_until := cur.lease_until;
				RETURN;
			END IF;
		END IF;

		-- 1. The job's lock: a transaction-scoped advisory lock on (this
		-- table's jobs table, the job's hash), held until COMMIT. A second
		-- claim of the job waits here and then sees the first's run. Unlike
		-- the row lock of version 1 (an upsert of the job's row in
		-- {{jobs}}), it writes nothing: a claim that waited and then finds
		-- the run taken commits without a WAL flush. Two jobs whose names
		-- hash alike merely share a lock.
		PERFORM pg_advisory_xact_lock('{{jobs}}'::regclass::oid::integer, hashtext(p_job));
`

// claimV3 is migration 3 (released: never edit it, nor the parts it
// shares with claimV1).
const claimV3 = `	DROP FUNCTION {{claim}}(text, bigint, text, text, bigint, bigint, integer, boolean);
	CREATE FUNCTION {{claim}}` + claimParams + `, OUT holder text` + claimVars + `		-- Three reads at most, each answering what it can with nothing
		-- written (my own re-sent claim, a finished run, a live lease):
		--   pass 0, before any lock (the read before the
		--     transaction, docs/spec.md#s3-1);
		--   pass 1, under the job's lock: a transaction-scoped advisory
		--     lock on (this table's jobs table, the job's hash), held until
		--     COMMIT, which serialises the claims of one job and writes
		--     nothing. A run still absent here is decided (late, overlap
		--     or won) under the lock;
		--   pass 2, an expired lease only: the run locked FOR UPDATE
		--     against a concurrent renew, finish or release, and read again
		--     (a renewal may have landed since pass 1).
		-- Store now is read after each read: clock_timestamp(), not now(),
		-- which is the transaction's start and may be stale after a wait.
		FOR pass IN 0..2 LOOP
			IF pass < 2 THEN
				SELECT * INTO cur FROM {{runs}} AS r WHERE r.job = p_job AND r.slot = p_slot;
			ELSE
				SELECT * INTO cur FROM {{runs}} AS r WHERE r.job = p_job AND r.slot = p_slot FOR UPDATE;
			END IF;
			found_run := FOUND;
			now_ms := {{now}};
			store_now := now_ms;
			IF found_run THEN
				attempt := cur.attempt;
				IF cur.status = 'running' AND cur.token = p_token THEN
					outcome := 'won';
					lease_until := cur.lease_until;
					RETURN;
				ELSIF cur.status <> 'running' THEN
					outcome := 'done';
					attempt := 0;
					IF cur.status <> 'interrupted' THEN
						holder := cur.instance;
					END IF;
					RETURN;
				ELSIF cur.lease_until >= now_ms THEN
					outcome := 'running';
					lease_until := cur.lease_until;
					holder := cur.instance;
					RETURN;
				END IF;
				EXIT WHEN pass = 2; -- expired, and the run is locked
			ELSE
				EXIT WHEN pass > 0; -- absent, under the job's lock
			END IF;
			IF pass = 0 THEN
				PERFORM pg_advisory_xact_lock('{{jobs}}'::regclass::oid::integer, hashtext(p_job));
			END IF;
		END LOOP;
		attempt := 0;

` + claimFirst + claimTakeover

// claimV4 is migration 4: claimV3's function, replaced, recording a first
// attempt as started at max(store now, slot).
var claimV4 = derive(claimV3, "CREATE FUNCTION",
	"CREATE FUNCTION", "CREATE OR REPLACE FUNCTION",
	"VALUES (p_job, p_slot, 'running', 1, p_instance, p_token,\n\t\t\t\t\tnow_ms, NULL,",
	"VALUES (p_job, p_slot, 'running', 1, p_instance, p_token,\n\t\t\t\t\tgreatest(now_ms, p_slot), NULL,")

// claimV5 is migration 5's function: claimV4's, replaced, with two
// changes for notes. A note answers done with no holder, as claim.Decide
// does (only a run that ran to its end names one). And the first
// attempt's INSERT does nothing when the slot's row appeared since the
// read under the job's lock: claims write only under that lock, so the
// row is a note recorded meanwhile (Record takes no lock), and the claim
// is answered done; without the ON CONFLICT it would fail with a unique
// violation. The INSERT waits for a note not yet committed, and inserts
// if that note's transaction rolls back.
var claimV5 = derive(claimV4, "CREATE OR REPLACE FUNCTION",
	"IF cur.status <> 'interrupted' THEN",
	"IF cur.status NOT IN ('interrupted', 'skipped', 'missed', 'unknown') THEN",
	"NULL, now_ms + p_lease_ms, NULL, '');\n\t\t\tINSERT INTO {{history}}",
	"NULL, now_ms + p_lease_ms, NULL, '')\n\t\t\t\tON CONFLICT (job, slot) DO NOTHING;\n"+
		"\t\t\tIF NOT FOUND THEN\n\t\t\t\toutcome := 'done';\n\t\t\t\tRETURN;\n\t\t\tEND IF;\n"+
		"\t\t\tINSERT INTO {{history}}")

// derive returns base from its first occurrence of from on, with each
// pair of replacements (old, new) applied once; it panics, at package
// initialisation, when from or an old string is not in base.
func derive(base, from string, pairs ...string) string {
	i := strings.Index(base, from)
	if i < 0 {
		panic("pgclaim: derive: " + from + " not found")
	}
	out := base[i:]
	for k := 0; k+1 < len(pairs); k += 2 {
		if !strings.Contains(out, pairs[k]) {
			panic("pgclaim: derive: " + pairs[k] + " not found")
		}
		out = strings.Replace(out, pairs[k], pairs[k+1], 1)
	}
	return out
}

// nowMs is the store's clock in integer milliseconds since the Unix epoch.
// clock_timestamp() moves within a transaction and within a statement, so
// every statement below reads it at most once and derives the rest from
// that reading.
const nowMs = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// SQL of the migration machinery. pg_advisory_xact_lock serialises the
// instances that start together: each later one finds the schema already at
// the latest version. Existence is checked with to_regclass rather than
// CREATE ... IF NOT EXISTS, so that a role allowed only to read and write
// the tables (an administrator ran the migration) can start.
const (
	lockMigrationSQL  = `SELECT pg_advisory_xact_lock($1)`
	regclassSQL       = `SELECT to_regclass($1) IS NOT NULL`
	schemaExistsSQL   = `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`
	currentSchemaSQL  = `SELECT current_schema()`
	createMigrationsT = `CREATE TABLE {{schema}} (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`
	currentVersionSQL = `SELECT COALESCE(MAX(version), 0) FROM {{schema}}`
	recordVersionSQL  = `INSERT INTO {{schema}} (version) VALUES ($1)`
)

// SQL of the claim, the reads and the fenced writes.
const (
	runColumns = `r.job, r.slot, r.status, r.attempt, r.instance, r.token,
		r.started_at, r.finished_at, r.lease_until, r.exit_code, r.output_tail,
		r.reason, r.held_by`

	// selectRunSQL reads store now and the run (all NULL when there is
	// none) in one plain statement: the read before the transaction
	// (docs/spec.md#s3-1) and Leaser.Read.
	selectRunSQL = `SELECT {{now}}, ` + runColumns + `
		FROM (SELECT 1) AS one LEFT JOIN {{runs}} AS r ON r.job = $1 AND r.slot = $2`

	// claimSQL is the whole decision, one round trip.
	claimSQL = `SELECT outcome, attempt, store_now, lease_until, coalesce(holder, '')
		FROM {{claim}}($1, $2, $3, $4, $5, $6, $7, $8)`

	// claimBatchSQL is many claims in one statement, one round trip and
	// one transaction (one commit, one WAL flush for all): the function
	// is called for each row of the arrays in their order.
	claimBatchSQL = `SELECT c.outcome, c.attempt, c.store_now, c.lease_until, coalesce(c.holder, '')
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::integer[], $8::boolean[])
			WITH ORDINALITY AS r(job, slot, token, instance, max_late_ms, lease_ms, max_attempts, overlap_skip, ord)
		CROSS JOIN LATERAL {{claim}}(r.job, r.slot, r.token, r.instance, r.max_late_ms, r.lease_ms, r.max_attempts, r.overlap_skip) AS c
		ORDER BY r.ord`

	// renewSQL extends a lease, fenced by token and status. StoreNow is
	// returned as lease_until - lease: the same reading of the clock.
	renewSQL = `UPDATE {{runs}} AS r SET lease_until = {{now}} + $3
		WHERE r.job = $1 AND r.slot = $2 AND r.token = $4 AND r.status = 'running'
		RETURNING r.attempt, r.lease_until - $3, r.lease_until`

	// finishSQL records a result, fenced by token and status, and appends
	// "finished" to the history, in one statement.
	finishSQL = `WITH u AS (
			UPDATE {{runs}} AS r SET status = $3, exit_code = $4, output_tail = $5,
				finished_at = greatest(r.started_at, {{now}})
			WHERE r.job = $1 AND r.slot = $2 AND r.token = $6 AND r.status = 'running'
			RETURNING r.job, r.slot, r.attempt, r.token, r.instance, r.finished_at)
		INSERT INTO {{history}} (job, slot, attempt, token, instance, event, at)
		SELECT job, slot, attempt, token, instance, 'finished', finished_at FROM u
		RETURNING attempt`

	// releaseSQL ends a lease, fenced by token and status, and appends
	// "released". The lease ends one millisecond before now, so that
	// lease_until < now holds at once and a backup's claim in the same
	// millisecond already takes over.
	releaseSQL = `WITH u AS (
			UPDATE {{runs}} AS r SET lease_until = {{now}} - 1
			WHERE r.job = $1 AND r.slot = $2 AND r.token = $3 AND r.status = 'running'
			RETURNING r.job, r.slot, r.attempt, r.token, r.instance, r.lease_until + 1 AS at)
		INSERT INTO {{history}} (job, slot, attempt, token, instance, event, at)
		SELECT job, slot, attempt, token, instance, 'released', at FROM u
		RETURNING attempt`

	// listRunsSQL and listJobRunsSQL serve status, newest slot first (index
	// {{slotidx}} and the primary key); with listStatusSQL, of the runs in
	// the states of the array $1.
	listRunsSQL    = `SELECT ` + runColumns + ` FROM {{runs}} AS r ORDER BY r.slot DESC, r.job LIMIT $1`
	listJobRunsSQL = `SELECT ` + runColumns + ` FROM {{runs}} AS r WHERE r.job = $2 ORDER BY r.slot DESC LIMIT $1`
	listStatusSQL  = `SELECT ` + runColumns + ` FROM {{runs}} AS r WHERE r.status = ANY($2::text[])
		ORDER BY r.slot DESC, r.job LIMIT $1`
	listJobStatusSQL = `SELECT ` + runColumns + ` FROM {{runs}} AS r WHERE r.job = $2 AND r.status = ANY($3::text[])
		ORDER BY r.slot DESC LIMIT $1`

	// recordSQL inserts a note unless the slot has a row (a claim or an
	// earlier note), stamped with store time. It takes no lock: a claim
	// that inserts the slot's row after it answers done (claimV5).
	recordSQL = `INSERT INTO {{runs}} (job, slot, status, attempt, instance, token,
			started_at, finished_at, lease_until, exit_code, output_tail, reason, held_by)
		VALUES ($1, $2, $3, 0, $4, '', 0, {{now}}, 0, NULL, '', $5, $6)
		ON CONFLICT (job, slot) DO NOTHING`

	// lockPruneSQL serialises the prunes of several instances.
	lockPruneSQL = `SELECT pg_advisory_xact_lock($1)`

	// pruneSQL deletes old runs that are finished or whose lease ended
	// before the cutoff, and their history; a live run's lease_until >= now
	// > cutoff, so it is never deleted. It returns how many runs it deleted.
	pruneSQL = `WITH c AS (SELECT {{now}} - $1::bigint AS cutoff),
		d AS (DELETE FROM {{runs}} AS r USING c
			WHERE r.slot < c.cutoff AND (r.status <> 'running' OR r.lease_until < c.cutoff)
			RETURNING r.job, r.slot),
		h AS (DELETE FROM {{history}} AS h USING d WHERE h.job = d.job AND h.slot = d.slot)
		SELECT count(*) FROM d`

	// pruneJobsSQL forgets the lock rows of jobs with no runs left (a job
	// removed from the crontab). It runs in its own transaction after
	// pruneSQL's: holding deleted runs' locks while waiting for a job's lock
	// row would deadlock with a claim holding that row. A claim that
	// re-creates a row deleted here simply inserts it again.
	pruneJobsSQL = `DELETE FROM {{jobs}} AS j WHERE NOT EXISTS (SELECT 1 FROM {{runs}} AS r WHERE r.job = j.job)`
)
