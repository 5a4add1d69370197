package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/pgclaim"
	"github.com/anarchon/anarchon/internal/redisclaim"
	"github.com/anarchon/anarchon/internal/storetls"
)

// errorCases are invalid crontabs and their problems, "place:field:substring"
// (place: the line, 0 for none, or the ANARCHON_* variable). They also seed
// FuzzParse.
var errorCases = []struct {
	name string
	yaml string
	env  []string
	want []string
}{
	// ---- structure ----
	{name: "malformed yaml", yaml: "jobs:\n  - name: a\n   schedule: x\n",
		want: []string{"2::invalid YAML: did not find expected '-' indicator (in the block that starts on this line)"}},
	{name: "malformed yaml, scanner", yaml: "jobs:\n  - name: a\n    command: x: y\n",
		want: []string{"3::invalid YAML: mapping values are not allowed in this context"}},
	{name: "unclosed flow mapping", yaml: "namespace: a\nlog: {level: info\njobs: []\n",
		want: []string{"2::invalid YAML: did not find expected ',' or '}'"}},
	{name: "unknown anchor", yaml: "namespace: *nope\n",
		want: []string{"0::invalid YAML: unknown anchor 'nope' referenced"}},
	{name: "tab indentation", yaml: "jobs:\n\t- name: a\n",
		want: []string{"2::invalid YAML: found character that cannot start any token"}},
	{name: "two documents", yaml: "namespace: a\n---\nnamespace: b\n",
		want: []string{"2::more than one YAML document"}},
	{name: "root is a list", yaml: "- a\n- b\n",
		want: []string{"1::the crontab must be a mapping"}},
	{name: "root is a scalar", yaml: "hello\n",
		want: []string{"1::the crontab must be a mapping"}},
	{name: "unknown top-level key with suggestion", yaml: "namspace: x\n",
		want: []string{`1:namspace:unknown key "namspace" (did you mean "namespace"?)`}},
	{name: "unknown key belongs elsewhere", yaml: "maxLateMs: 5\n",
		want: []string{`1:maxLateMs:did you mean defaults.maxLateMs or jobs[].maxLateMs?`}},
	{name: "snake case key", yaml: "defaults:\n  max_late_ms: 5\n",
		want: []string{`2:defaults.max_late_ms:unknown key "max_late_ms" (did you mean "maxLateMs"?)`}},
	{name: "unknown key far from any", yaml: "backend:\n  sqlite:\n    frobnicate: 1\n",
		want: []string{`3:backend.sqlite.frobnicate:unknown key "frobnicate"; known keys: path, busyTimeoutMs`}},
	{name: "unknown job key", yaml: "jobs:\n" + job("a") + "    scheduel: \"* * * * *\"\n",
		want: []string{`5:jobs[0].scheduel:unknown key "scheduel" (did you mean "schedule"?)`}},
	{name: "backend key in a job", yaml: "jobs:\n" + job("a") + "    retention: 1h\n",
		want: []string{`5:jobs[0].retention:a job has no such key; did you mean backend.retention?`}},
	{name: "extension keys only at the top", yaml: "x-a: 1\nbackend:\n  x-b: 2\n",
		want: []string{`3:backend.x-b:unknown key "x-b"`}},
	{name: "duplicate key", yaml: "namespace: a\nnamespace: b\n",
		want: []string{`2:namespace:duplicate key "namespace" (first at line 1)`}},
	{name: "non-string key", yaml: "1: a\n",
		want: []string{`1::a key must be a string, not an integer`}},
	{name: "section not a mapping", yaml: "backend: sqlite\ndefaults: [1]\n",
		want: []string{`1:backend:must be a mapping of settings, not a string`, `2:defaults:must be a mapping of settings, not a list`}},
	{name: "jobs not a list", yaml: "jobs:\n  name: a\n",
		want: []string{`2:jobs:must be a list of jobs, not a mapping`}},
	{name: "job not a mapping", yaml: "jobs:\n  - a\n  - [1]\n",
		want: []string{`2:jobs[0]:a job must be a mapping`, `3:jobs[1]:a job must be a mapping`}},
	{name: "bad merge key", yaml: "jobs:\n  - <<: 5\n    name: a\n    schedule: \"* * * * *\"\n    command: x\n",
		want: []string{`2:jobs[0]:a merge key (<<) takes a mapping or a list of mappings, not an integer`}},

	// ---- types ----
	{name: "string for integer", yaml: "shutdownGraceMs: \"5000\"\n",
		want: []string{`1:shutdownGraceMs:must be an integer (milliseconds), not a string; write it without quotes`}},
	{name: "duration for milliseconds", yaml: "defaults:\n  leaseMs: 30s\n",
		want: []string{`2:defaults.leaseMs:takes a number of milliseconds, not a duration`}},
	{name: "float for integer", yaml: "backend:\n  sqlite: {busyTimeoutMs: 1.5}\n",
		want: []string{`2:backend.sqlite.busyTimeoutMs:must be an integer (milliseconds), not a number`}},
	{name: "integer out of range", yaml: "shutdownGraceMs: 99999999999999999999\n",
		want: []string{`1:shutdownGraceMs:must be an integer (milliseconds), not a number`}},
	{name: "milliseconds too large", yaml: "shutdownGraceMs: 9223372036854775\n",
		want: []string{`1:shutdownGraceMs:is too large`}},
	{name: "integer for string", yaml: "namespace: 123\n",
		want: []string{`1:namespace:must be a string, not an integer; write "123" in quotes`}},
	{name: "boolean for string", yaml: "jobs:\n  - {name: a, schedule: \"* * * * *\", command: true}\n",
		want: []string{`2:jobs[0].command:must be a string, not a boolean`}},
	{name: "mapping for string", yaml: "instance: {a: 1}\n",
		want: []string{`1:instance:must be a string, not a mapping`}},
	{name: "integer for duration", yaml: "defaults:\n  timeout: 60\n",
		want: []string{`2:defaults.timeout:must be a Go duration such as "90s", "5m" or "1h30m", not an integer`}},
	{name: "bad duration", yaml: "backend:\n  retention: 7d\n",
		want: []string{`2:backend.retention:bad duration "7d"`}},
	{name: "args not a list", yaml: "jobs:\n  - {name: a, schedule: \"* * * * *\", args: /bin/true}\n",
		want: []string{`2:jobs[0].args:must be a list of strings, not a string`}},
	{name: "args with a mapping", yaml: "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    args:\n      - /bin/echo\n      - {a: 1}\n",
		want: []string{`6:jobs[0].args[1]:must be a string, not a mapping`}},
	{name: "env not a mapping", yaml: "jobs:\n" + job("a") + "    env: [A=1]\n",
		want: []string{`5:jobs[0].env:must be a mapping of variable names to values, not a list`}},

	// ---- top-level values ----
	{name: "bad namespace", yaml: "namespace: \"a.b\"\n",
		want: []string{`1:namespace:bad namespace "a.b": must be 1 to 64 letters, digits, _ or -`}},
	{name: "namespace too long", yaml: "namespace: " + strings.Repeat("n", 65) + "\n",
		want: []string{`1:namespace:bad namespace`}},
	{name: "bad instance", yaml: "instance: \"a b\"\n",
		want: []string{`1:instance:must not contain white space`}},
	{name: "negative shutdown grace", yaml: "shutdownGraceMs: -1\n",
		want: []string{`1:shutdownGraceMs:must be 0 or more, not -1`}},
	{name: "bad log", yaml: "log: {level: verbose, format: xml}\n",
		want: []string{`1:log.level:must be one of debug, info, warn, error; not "verbose"`, `1:log.format:must be one of auto, console, json; not "xml"`}},

	// ---- backend ----
	{name: "bad backend type", yaml: "backend: {type: mysql}\n",
		want: []string{`1:backend.type:must be one of nats, postgres, rabbitmq, redis, sqlite; not "mysql"`}},
	{name: "bad redis strategy", yaml: "backend: {redis: {strategy: lock}}\n",
		want: []string{`1:backend.redis.strategy:must be one of lease, stream-id, idmp, script, auto; not "lock"`}},
	{name: "retention not positive", yaml: "backend: {retention: 0s}\n",
		want: []string{`1:backend.retention:must be greater than 0`}},
	{name: "negative busy timeout", yaml: "backend: {sqlite: {busyTimeoutMs: -5}}\n",
		want: []string{`1:backend.sqlite.busyTimeoutMs:must be 0 or more, not -5`}},
	{name: "empty sqlite path", yaml: "backend: {sqlite: {path: \"\"}}\n",
		want: []string{`1:backend.sqlite.path:must not be empty`}},
	{name: "postgres without dsn", yaml: "backend:\n  type: postgres\n",
		want: []string{`2:backend.postgres.dsn:required when backend.type is postgres`}},
	{name: "bad dsn", yaml: "backend:\n  postgres: {dsn: \"mysql://u:hunter2@db/x\"}\n",
		want: []string{`2:backend.postgres.dsn:must be a postgres:// URL or a key=value connection string`}},
	{name: "bad table", yaml: "backend:\n  postgres: {table: \"runs; drop table x\"}\n",
		want: []string{`2:backend.postgres.table:bad table name "runs; drop table x"`}},
	{name: "bad postgres synchronousCommit", yaml: "backend:\n  type: sqlite\n  postgres:\n    synchronousCommit: fast\n",
		want: []string{`4:backend.postgres.synchronousCommit:must be one of on, off, local, remote_write, remote_apply; not "fast"`}},
	{name: "postgres synchronousCommit in capitals", yaml: "backend:\n  postgres: {synchronousCommit: \"OFF\"}\n",
		want: []string{`2:backend.postgres.synchronousCommit:must be one of on, off, local, remote_write, remote_apply; not "OFF"`}},
	{name: "postgres synchronousCommit a boolean", yaml: "backend:\n  postgres:\n    synchronousCommit: false\n",
		want: []string{`3:backend.postgres.synchronousCommit:must be a string, not a boolean; write "false" in quotes`}},
	{name: "postgres synchronousCommit empty", yaml: "backend:\n  postgres:\n    synchronousCommit: \"\"\n",
		want: []string{`3:backend.postgres.synchronousCommit:must be one of on, off, local, remote_write, remote_apply; not ""`}},
	{name: "bad redis url scheme", yaml: "backend:\n  redis: {url: \"http://u:hunter2@cache:6379\"}\n",
		want: []string{`2:backend.redis.url:must start with redis://, rediss://, unix://, not http://`}},
	{name: "unparsable redis url", yaml: "backend:\n  redis: {url: \"redis://u:hunter2@cache:port/0\"}\n",
		want: []string{`2:backend.redis.url:is not a valid URL`}},
	{name: "url without host", yaml: "backend:\n  rabbitmq: {url: \"amqp:///vhost\"}\n",
		want: []string{`2:backend.rabbitmq.url:has no host`}},
	{name: "bad nats url in a list", yaml: "backend:\n  nats: {url: \"nats://a:4222,http://b:4222\"}\n",
		want: []string{`2:backend.nats.url:one of the URLs must start with nats://, tls://, ws://, wss://`}},
	{name: "bad nats stream", yaml: "backend:\n  nats: {stream: \"A.B\"}\n",
		want: []string{`2:backend.nats.stream:bad stream name "A.B"`}},
	{name: "idmp duration range", yaml: "backend:\n  redis:\n    strategyOptions: {durationSec: 0}\n",
		want: []string{`3:backend.redis.strategyOptions.durationSec:must be between 1 and 86400, not 0`}},
	{name: "idmp duration too long", yaml: "backend:\n  redis:\n    strategyOptions: {durationSec: 86401}\n",
		want: []string{`3:backend.redis.strategyOptions.durationSec:must be between 1 and 86400, not 86401`}},
	{name: "zero windows", yaml: "backend:\n  redis: {strategyOptions: {windowMs: 0}}\n  rabbitmq: {slotTtlMs: 0}\n  nats: {duplicateWindowMs: -1}\n",
		want: []string{`2:backend.redis.strategyOptions.windowMs:must be greater than 0`, `3:backend.rabbitmq.slotTtlMs:must be greater than 0`,
			`4:backend.nats.duplicateWindowMs:must be greater than 0, not -1`}},
	{name: "empty password file", yaml: "backend:\n  redis: {passwordFile: \"\"}\n",
		want: []string{`2:backend.redis.passwordFile:must not be empty`}},

	// ---- defaults and per-job policies ----
	{name: "defaults out of range", yaml: `defaults:
  maxLateMs: -1
  leaseMs: 0
  heartbeatMs: 0
  maxAttempts: 0
  killGraceMs: -1
  timeout: -1s
  outputTailBytes: 1048577
  overlap: later
  shell: ""
`, want: []string{
		`2:defaults.maxLateMs:must be 0 or more, not -1`,
		`3:defaults.leaseMs:must be greater than 0, not 0`,
		`4:defaults.heartbeatMs:must be greater than 0, not 0`,
		`5:defaults.maxAttempts:must be between 1 and`,
		`6:defaults.killGraceMs:must be 0 or more, not -1`,
		`7:defaults.timeout:must be greater than 0, not -1s`,
		`8:defaults.outputTailBytes:must be between 0 and 1048576, not 1048577`,
		`9:defaults.overlap:must be one of skip, allow, replace, queue; not "later"`,
		`10:defaults.shell:must not be empty`,
	}},
	{name: "job policies out of range", yaml: "jobs:\n" + job("a") + `    maxLateMs: -1
    leaseMs: -3
    outputTailBytes: -1
    timeout: 0s
    overlap: never
`, want: []string{
		`5:jobs[0].maxLateMs:must be 0 or more, not -1`,
		`6:jobs[0].leaseMs:must be greater than 0, not -3`,
		`7:jobs[0].outputTailBytes:must be between 0 and 1048576, not -1`,
		`8:jobs[0].timeout:must be greater than 0, not 0s`,
		`9:jobs[0].overlap:must be one of skip, allow, replace, queue; not "never"`,
	}},
	{name: "overlap skip on a claim-only backend", yaml: "backend:\n  type: nats\ndefaults:\n  overlap: skip\njobs:\n" + job("a") + job("b") + job("c") + "    overlap: skip\n",
		// Reported once where it is set: at defaults for a and b, at c.
		want: []string{
			`4:defaults.overlap:overlap: skip cannot be enforced on backend nats (nats://127.0.0.1:4222, stream ANARCHON): a claim-only store`,
			`15:jobs[2].overlap:use overlap: allow (the default there), or a backend that keeps leases (docs/backends.md)`,
		}},
	{name: "overlap skip on redis stream-id", yaml: "backend:\n  type: redis\n  redis:\n    strategy: stream-id\njobs:\n" + job("a") + "    overlap: skip\n",
		want: []string{`9:jobs[0].overlap:overlap: skip cannot be enforced on backend redis stream-id (redis://127.0.0.1:6379/0)`}},
	{name: "retry attempts out of range", yaml: "defaults:\n  retry: {attempts: -1}\njobs:\n" + job("a") + "    retry:\n      attempts: 11\n",
		want: []string{`2:defaults.retry.attempts:-1`, `8:jobs[0].retry.attempts:11`}},
	{name: "retry backoff above its cap", yaml: "jobs:\n" + job("a") + "    retry: {attempts: 2, backoffMs: 5000, maxBackoffMs: 100}\n",
		want: []string{`5:jobs[0].retry.maxBackoffMs:retry.maxBackoffMs 100 is less than retry.backoffMs 5000`}},
	{name: "retry on rabbitmq", yaml: "backend:\n  type: rabbitmq\njobs:\n" + job("a") + "    overlap: allow\n    retry: {attempts: 2}\n",
		want: []string{`8:jobs[0].retry.attempts:retry cannot be used on backend rabbitmq: a retry is a run asked for through the job's control record`}},
	{name: "overlap replace and queue on claim-only backends", yaml: "backend:\n  type: rabbitmq\ndefaults:\n  overlap: queue\njobs:\n" + job("a") + job("b") + "    overlap: replace\n",
		want: []string{
			`4:defaults.overlap:overlap: queue cannot be enforced on backend rabbitmq (amqp://guest:xxxxx@127.0.0.1:5672/): a claim-only store remembers that a slot was claimed, not whether its run still runs, so a waiting slot cannot learn when the running one ends; use overlap: allow`,
			`12:jobs[1].overlap:overlap: replace cannot be enforced on backend rabbitmq (amqp://guest:xxxxx@127.0.0.1:5672/): a claim-only store remembers that a slot was claimed, not whether its run still runs, so the next slot's claim cannot wait for the replaced command to stop and both would run at once`,
		}},
	{name: "overlap replace on redis script", yaml: "backend:\n  type: redis\n  redis:\n    strategy: script\njobs:\n" + job("a") + "    overlap: replace\n",
		want: []string{`9:jobs[0].overlap:overlap: replace cannot be enforced on backend redis script (redis://127.0.0.1:6379/0)`}},
	{name: "keepRuns out of range", yaml: "defaults:\n  keepRuns: 0\njobs:\n" + job("a") + "    keepRuns: 1000001\n" + job("b") + "    keepRuns: ten\n",
		want: []string{
			`2:defaults.keepRuns:must be between 1 and 1000000, not 0`,
			`7:jobs[0].keepRuns:must be between 1 and 1000000, not 1000001`,
			`11:jobs[1].keepRuns:must be an integer`,
		}},
	{name: "keepRuns on a claim-only backend", yaml: "backend:\n  type: nats\ndefaults:\n  keepRuns: 5\njobs:\n" + job("a") + job("b") + "    keepRuns: 2\n",
		want: []string{
			`4:defaults.keepRuns:keepRuns cannot be enforced on backend nats (nats://127.0.0.1:4222, stream ANARCHON): a claim-only store forgets its runs by its own retention and cannot delete a job's older runs; remove keepRuns, or use a backend that keeps leases (docs/backends.md)`,
			`12:jobs[1].keepRuns:keepRuns cannot be enforced on backend nats`,
		}},
	{name: "catch-up not a policy", yaml: "defaults:\n  catchUp: oldest\njobs:\n" + job("a") + "    catchUp: All\n" + job("b") + "    catchUp: 3\n",
		want: []string{
			`2:defaults.catchUp:must be one of none, latest, all; not "oldest"`,
			`7:jobs[0].catchUp:must be one of none, latest, all; not "All"`,
			`11:jobs[1].catchUp:must be a string`,
		}},
	{name: "onDrift not a policy", yaml: "defaults:\n  onDrift: stop\njobs:\n" + job("a") + "    onDrift: Pause\n",
		want: []string{
			`2:defaults.onDrift:must be one of run, pause; not "stop"`,
			`7:jobs[0].onDrift:must be one of run, pause; not "Pause"`,
		}},
	{name: "catch-up error names the job", yaml: "jobs:\n" + job("nightly") + "    catchUp: every\n",
		want: []string{`5:jobs[0].catchUp:must be one of none, latest, all; not "every"`}},
	{name: "heartbeat not below lease in defaults", yaml: "defaults:\n  leaseMs: 5000\n  heartbeatMs: 5000\njobs:\n" + job("a") + job("b"),
		// Reported once, at defaults, not again for every job.
		want: []string{`3:defaults.heartbeatMs:heartbeatMs 5000 must be less than leaseMs 5000 (from defaults.leaseMs, line 2)`}},
	{name: "job lease below inherited heartbeat", yaml: "defaults:\n  heartbeatMs: 10000\njobs:\n" + job("a") + "    leaseMs: 6000\n",
		want: []string{`7:jobs[0].leaseMs:heartbeatMs 10000 (from defaults.heartbeatMs, line 2) must be less than leaseMs 6000`}},
	{name: "job heartbeat above built-in lease", yaml: "jobs:\n" + job("a") + "    heartbeatMs: 30000\n",
		want: []string{`5:jobs[0].heartbeatMs:heartbeatMs 30000 must be less than leaseMs 30000 (from built-in default)`}},
	{name: "lease too short for a heartbeat", yaml: "jobs:\n" + job("a") + "    leaseMs: 2\n",
		want: []string{`5:jobs[0].leaseMs:leaseMs 2 is too short: the default heartbeatMs (leaseMs/3) would be 0`}},
	{name: "claim spread negative", yaml: "defaults:\n  claimSpreadMs: -1\n",
		want: []string{`2:defaults.claimSpreadMs:must be between 0 and 1000, not -1`}},
	{name: "claim spread too large", yaml: "jobs:\n" + job("a") + "    claimSpreadMs: 1001\n",
		want: []string{`5:jobs[0].claimSpreadMs:must be between 0 and 1000, not 1001`}},
	{name: "claim spread not an integer", yaml: "defaults:\n  claimSpreadMs: 10ms\n",
		want: []string{`2:defaults.claimSpreadMs:must be an integer (milliseconds), not a string; this key takes a number of milliseconds, not a duration`}},
	{name: "claim spread not below maxLate in defaults", yaml: "defaults:\n  maxLateMs: 500\n  claimSpreadMs: 500\njobs:\n" + job("a") + job("b"),
		// Reported once, at defaults, not again for every job.
		want: []string{`3:defaults.claimSpreadMs:claimSpreadMs 500 must be less than maxLateMs 500 (from defaults.maxLateMs, line 2)`}},
	{name: "job claim spread not below inherited maxLate", yaml: "defaults:\n  maxLateMs: 300\njobs:\n" + job("a") + "    claimSpreadMs: 400\n",
		want: []string{`7:jobs[0].claimSpreadMs:claimSpreadMs 400 must be less than maxLateMs 300 (from defaults.maxLateMs, line 2)`}},
	{name: "job maxLate below inherited claim spread", yaml: "defaults:\n  claimSpreadMs: 200\njobs:\n" + job("a") + "    maxLateMs: 150\n" + job("b"),
		want: []string{`7:jobs[0].maxLateMs:claimSpreadMs 200 (from defaults.claimSpreadMs, line 2) must be less than maxLateMs 150`}},
	{name: "claim spread from env not below maxLate", yaml: "defaults:\n  maxLateMs: 50\n",
		env:  []string{"ANARCHON_DEFAULTS_CLAIMSPREADMS=50"},
		want: []string{`ANARCHON_DEFAULTS_CLAIMSPREADMS:defaults.claimSpreadMs:claimSpreadMs 50 must be less than maxLateMs 50 (from defaults.maxLateMs, line 2)`}},
	{name: "claim ahead too large", yaml: "jobs:\n" + job("a") + "    claimAheadMs: 1001\n",
		want: []string{`5:jobs[0].claimAheadMs:must be between 0 and 1000, not 1001`}},
	{name: "claim ahead not below the heartbeat in defaults", yaml: "defaults:\n  heartbeatMs: 500\n  claimAheadMs: 500\njobs:\n" + job("a") + job("b"),
		// Reported once, at defaults, not again for every job.
		want: []string{`3:defaults.claimAheadMs:claimAheadMs 500 must be less than heartbeatMs 500 (from defaults.heartbeatMs, line 2): a claim sent ahead holds its lease unrenewed until the slot`}},
	{name: "job claim ahead not below the default heartbeat", yaml: "jobs:\n" + job("a") + "    leaseMs: 1500\n    claimAheadMs: 500\n",
		want: []string{`6:jobs[0].claimAheadMs:claimAheadMs 500 must be less than heartbeatMs (leaseMs/3) 500 (from jobs[0].leaseMs, line 5)`}},
	{name: "job lease below inherited claim ahead", yaml: "defaults:\n  claimAheadMs: 400\njobs:\n" + job("a") + "    leaseMs: 900\n" + job("b"),
		want: []string{`7:jobs[0].leaseMs:claimAheadMs 400 (from defaults.claimAheadMs, line 2) must be less than heartbeatMs (leaseMs/3) 300`}},
	{name: "unknown zones", yaml: "defaults:\n  timezone: Europe/Atlantis\njobs:\n" + job("a") + "    timezone: Mars/Olympus\n" + job("b") + "    timezone: Local\n",
		want: []string{
			`2:defaults.timezone:unknown time zone "Europe/Atlantis"`,
			`7:jobs[0].timezone:unknown time zone "Mars/Olympus"`,
			`11:jobs[1].timezone:"Local" is each host's own zone`,
		}},
	{name: "empty zone", yaml: "defaults: {timezone: \"\"}\n",
		want: []string{`1:defaults.timezone:must not be empty`}},

	// ---- jobs ----
	{name: "missing name, schedule and command", yaml: "jobs:\n  - user: x\n",
		want: []string{`2:jobs[0].name:missing name`, `2:jobs[0].schedule:missing schedule`, `2:jobs[0]:missing command`}},
	{name: "bad job names", yaml: "jobs:\n" + job("\"a b\"") + job("\"\"") + job(strings.Repeat("x", 65)),
		want: []string{`2:jobs[0].name:bad job name "a b"`, `5:jobs[1].name:bad job name ""`, `8:jobs[2].name:bad job name`}},
	{name: "duplicate job name", yaml: "jobs:\n" + job("sync") + job("other") + job("sync"),
		want: []string{`8:jobs[2].name:duplicate job name "sync" (first defined at line 2)`}},
	{name: "bad schedule", yaml: "jobs:\n  - name: sync\n    schedule: \"*/61 * * * *\"\n    command: x\n",
		want: []string{`3:jobs[0].schedule:bad schedule "*/61 * * * *"`}},
	{name: "empty schedule", yaml: "jobs:\n  - {name: a, schedule: \" \", command: x}\n",
		want: []string{`2:jobs[0].schedule:must not be empty`}},
	{name: "bad schedule in a bad zone", yaml: "jobs:\n  - {name: a, schedule: \"nope\", command: x, timezone: No/Where}\n",
		want: []string{`2:jobs[0].schedule:bad schedule "nope"`, `2:jobs[0].timezone:unknown time zone`}},
	{name: "command and args", yaml: "jobs:\n" + job("a") + "    args: [x]\n",
		want: []string{`5:jobs[0].args:set either command (run by the shell) or args (run directly), not both`}},
	{name: "empty command and args", yaml: "jobs:\n  - {name: a, schedule: \"* * * * *\", command: \"\"}\n  - {name: b, schedule: \"* * * * *\", args: []}\n  - {name: c, schedule: \"* * * * *\", args: [\"\", x]}\n",
		want: []string{`2:jobs[0].command:must not be empty`, `3:jobs[1].args:must not be empty`, `4:jobs[2].args:the first element (the program) must not be empty`}},
	{name: "null command is missing", yaml: "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command:\n",
		want: []string{`2:jobs[0]:missing command`}},
	{name: "bad env", yaml: "jobs:\n" + job("a") + "    env:\n      1BAD: x\n      ANARCHON_SLOT: x\n      EMPTY:\n      OK: x\n      OK: y\n",
		want: []string{
			`6:jobs[0].env.1BAD:bad variable name "1BAD"`,
			`7:jobs[0].env.ANARCHON_SLOT:set by the daemon`,
			`8:jobs[0].env.EMPTY:must be a string, not null (write "" for an empty value)`,
			`10:jobs[0].env.OK:duplicate key "OK" (first at line 9)`,
		}},
	{name: "empty workdir and user", yaml: "jobs:\n" + job("a") + "    workdir: \"\"\n    user: \"\"\n",
		want: []string{`5:jobs[0].workdir:must not be empty`, `6:jobs[0].user:must not be empty`}},
	{name: "NUL in a command", yaml: "jobs:\n  - {name: a, schedule: \"* * * * *\", command: \"a\\0b\"}\n",
		want: []string{`2:jobs[0].command:must not contain a NUL character`}},

	// ---- retention ----
	{name: "retention below a job maxLate", yaml: "backend: {retention: 1m}\njobs:\n" + job("a") + "    maxLateMs: 120000\n",
		want: []string{`1:backend.retention:retention 1m0s must be at least the largest maxLateMs (120000, job "a", from jobs[0].maxLateMs, line 6)`}},
	{name: "retention below a job's maxLate and jitter", yaml: "backend: {retention: 1m}\njobs:\n" + job("a") + "    maxLateMs: 30000\n    jitterMs: 40000\n",
		want: []string{`1:backend.retention:retention 1m0s must be at least the largest maxLateMs + jitterMs (30000 + 40000, job "a", from jobs[0].maxLateMs, line 6)`}},
	{name: "maxLate above the built-in retention", yaml: "jobs:\n" + job("a") + "    maxLateMs: 700000000\n",
		want: []string{`5:jobs[0].maxLateMs:maxLateMs 700000000 is longer than backend.retention (168h0m0s, the built-in default)`}},

	// ---- claim-only retention (docs/spec.md#s2) ----
	{name: "script window too short for a job", yaml: `backend:
  type: redis
  redis: {strategy: script, strategyOptions: {windowMs: 100000}}
jobs:
` + job("a") + "    maxLateMs: 60000\n" + job("b") + "    maxLateMs: 50000\n",
		want: []string{`8:jobs[0].maxLateMs:maxLateMs 60000 must be at most half of backend.redis.strategyOptions.windowMs (100000): retention must exceed maxLate + clock skew + the longest pause`}},
	{name: "idmp duration too short for defaults", yaml: `backend:
  type: redis
  redis: {strategy: idmp, strategyOptions: {durationSec: 100}}
defaults: {maxLateMs: 60000}
jobs:
` + job("a") + job("b"),
		want: []string{`4:defaults.maxLateMs:maxLateMs 60000 must be at most half of backend.redis.strategyOptions.durationSec (100 s): retention must exceed maxLate + clock skew + the longest pause (jobs "a", "b")`}},
	{name: "auto checks both windows", yaml: `backend:
  type: redis
  redis:
    strategy: auto
    strategyOptions: {durationSec: 60, windowMs: 60000}
jobs:
` + job("a"),
		want: []string{
			`5:backend.redis.strategyOptions.durationSec:the built-in maxLateMs 60000 must be at most half of backend.redis.strategyOptions.durationSec (60 s)`,
			`5:backend.redis.strategyOptions.windowMs:the built-in maxLateMs 60000 must be at most half of backend.redis.strategyOptions.windowMs (60000)`,
		}},
	{name: "rabbitmq slot ttl", yaml: "backend:\n  type: rabbitmq\n  rabbitmq: {slotTtlMs: 100000}\njobs:\n" + job("a") + "    maxLateMs: 50001\n",
		want: []string{`8:jobs[0].maxLateMs:must be at most half of backend.rabbitmq.slotTtlMs (100000)`}},
	{name: "nats duplicate window from env", yaml: "backend:\n  type: nats\njobs:\n" + job("a"),
		env:  []string{"ANARCHON_BACKEND_NATS_DUPLICATEWINDOWMS=119999"},
		want: []string{`ANARCHON_BACKEND_NATS_DUPLICATEWINDOWMS:backend.nats.duplicateWindowMs:the built-in maxLateMs 60000 must be at most half of backend.nats.duplicateWindowMs (119999)`}},
	{name: "claim-only limits ignored for lease backends", yaml: "backend:\n  type: redis\n  redis: {strategyOptions: {windowMs: 1000}}\njobs:\n  - {name: a, schedule: \"*/61 * * * *\", command: x}\n",
		want: []string{`5:jobs[0].schedule:bad schedule`}},
	{name: "idmp too many slots", yaml: `backend:
  type: redis
  redis: {strategy: idmp, strategyOptions: {durationSec: 86400}}
jobs:
  - name: fast
    schedule: "*/2 * * * * *"
    command: x
`, want: []string{`6:jobs[0].schedule:more than 10000 slots within backend.redis.strategyOptions.durationSec (86400 s`}},
	{name: "auto too many slots on some days", yaml: `backend:
  type: redis
  redis: {strategy: auto, strategyOptions: {durationSec: 86400}}
jobs:
  - name: mondays
    schedule: "*/5 * * * * 1"
    command: x
`, want: []string{`6:jobs[0].schedule:(strategy auto uses idmp on servers that have it)`}},

	// ---- environment overrides ----
	{name: "bad env overrides", yaml: "jobs:\n" + job("a"),
		env: []string{
			"ANARCHON_BACKEND_TYPE=mysql",
			"ANARCHON_BACKEND_SQLITE_BUSYTIMEOUTMS=5s",
			"ANARCHON_DEFAULTS_TIMEOUT=forever",
			"ANARCHON_NAMESPACE=a b",
		},
		want: []string{
			`ANARCHON_BACKEND_TYPE:backend.type:must be one of nats, postgres, rabbitmq, redis, sqlite; not "mysql"`,
			`ANARCHON_BACKEND_SQLITE_BUSYTIMEOUTMS:backend.sqlite.busyTimeoutMs:must be an integer (milliseconds), not "5s"`,
			`ANARCHON_DEFAULTS_TIMEOUT:defaults.timeout:bad duration "forever"`,
			`ANARCHON_NAMESPACE:namespace:bad namespace "a b"`,
		}},
	{name: "env bad postgres synchronousCommit", yaml: "jobs:\n" + job("a"), env: []string{"ANARCHON_BACKEND_POSTGRES_SYNCHRONOUSCOMMIT=async"},
		want: []string{`ANARCHON_BACKEND_POSTGRES_SYNCHRONOUSCOMMIT:backend.postgres.synchronousCommit:must be one of on, off, local, remote_write, remote_apply; not "async"`}},
	{name: "env postgres without dsn", yaml: "jobs:\n" + job("a"), env: []string{"ANARCHON_BACKEND_TYPE=postgres"},
		want: []string{`ANARCHON_BACKEND_TYPE:backend.postgres.dsn:required when backend.type is postgres`}},
	{name: "env override wins over a bad file value", yaml: "namespace: \"bad ns\"\nlog: {level: loud}\n",
		env:  []string{"ANARCHON_NAMESPACE=good"},
		want: []string{`2:log.level:must be one of`}},

	// ---- every problem at once ----
	{name: "four problems", yaml: `namespace: cron
backend:
  type: sqlite
  sqlite: {busyTimeoutMs: -1}
jobs:
  - name: sync
    schedule: "*/61 * * * *"
    command: /usr/local/bin/sync
  - name: report
    schedule: "0 9 * * *"
    timezone: Europe/Nowhere
    command: report
    overlpa: skip
`, want: []string{
		`4:backend.sqlite.busyTimeoutMs:must be 0 or more, not -1`,
		`7:jobs[0].schedule:bad schedule "*/61 * * * *"`,
		`11:jobs[1].timezone:unknown time zone "Europe/Nowhere"`,
		`13:jobs[1].overlpa:unknown key "overlpa" (did you mean "overlap"?)`,
	}},
}

func TestErrors(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, parseErrs(t, tc.yaml, tc.env), tc.want)
		})
	}
}

func TestErrorsNameTheJob(t *testing.T) {
	errs := parseErrs(t, "jobs:\n"+job("a")+job("sync")+"    leaseMs: x\n", nil)
	if len(errs) != 1 || errs[0].Job != "sync" {
		t.Fatalf("got %v", errs)
	}
	want := `crontab.yaml:8: job "sync": jobs[1].leaseMs: must be an integer (milliseconds), not a string ("x")`
	if got := errs[0].Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestMalformedYAMLIsOneError(t *testing.T) {
	errs := parseErrs(t, "jobs:\n  - name: a\n    schedule: [\n", []string{"ANARCHON_BACKEND_TYPE=bogus"})
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Msg, "invalid YAML: ") || errs[0].Line == 0 {
		t.Errorf("got %v", errs)
	}
}

func TestMergeBombIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-0: &a0 {timezone: UTC}\n")
	for i := 1; i <= 30; i++ {
		b.WriteString("x-" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " {<<: [")
		for k := 0; k < 10; k++ {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + strconv.Itoa(i-1))
		}
		b.WriteString("]}\n")
	}
	b.WriteString("defaults:\n  <<: *a30\n")
	// Expanded, the merges would be 10^30 nodes: a loader without the
	// bound never returns (the test's timeout fails it); with it, the
	// file is refused by name.
	errs := parseErrs(t, b.String(), nil)
	if !strings.Contains(errs.Error(), "too complex") && !strings.Contains(errs.Error(), "nested more than") {
		t.Errorf("got %v", errs)
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	for _, yml := range []string{
		"backend:\n  postgres: {dsn: \"mysql://u:hunter2@db/x\"}\n",
		"backend:\n  postgres: {dsn: \"postgres://u:hunter2@db:x/x\"}\n",
		"backend:\n  postgres: {dsn: \"postgres://u:hun ter2@db/x\"}\n",
		"backend:\n  postgres: {dsn: \"hunter2\"}\n",
		"backend:\n  postgres: {dsn: 12345}\n",
		"backend:\n  redis: {url: \"http://u:hunter2@cache\"}\n",
		"backend:\n  redis: {url: \"redis://u:hunter2@cache:x\"}\n",
		"backend:\n  redis: {url: \"redis://:hunter2@ca che\"}\n",
		"backend:\n  redis: {url: \"redis://u:hunter2/x@cache\"}\n",
		"backend:\n  redis: {url: \"redis://u:hunter2%zz@cache\"}\n",
		"backend:\n  redis: {url: hunter2}\n",
		"backend:\n  redis: {url: \"hunter2:x@cache\"}\n",
		"backend:\n  rabbitmq: {url: \"amqp://u:hunter2@\"}\n",
		"backend:\n  nats: {url: \"nats://u:hunter2@a,http://b\"}\n",
		"backend:\n  nats: {url: [\"nats://u:hunter2@a\"]}\n",
	} {
		errs := parseErrs(t, yml, nil)
		if s := errs.Error(); strings.Contains(s, "hunter2") || strings.Contains(s, "hunter") {
			t.Errorf("secret in %q", s)
		}
	}
	errs := parseErrs(t, "", []string{"ANARCHON_BACKEND_POSTGRES_DSN=postgres://u:hunter2@db:x/", "ANARCHON_BACKEND_REDIS_URL=ftp://u:hunter2@x"})
	if s := errs.Error(); strings.Contains(s, "hunter2") || len(errs) != 2 {
		t.Errorf("got %q", s)
	}
}

func TestWatchAndMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		watch      bool
		listen     string
		problem    string
	}{
		{"defaults", "jobs: []\n", false, "127.0.0.1:9464", ""},
		{"set", "watch: true\nmetrics: {listen: \":9100\"}\njobs: []\n", true, ":9100", ""},
		{"disabled", "metrics: {listen: \"\"}\njobs: []\n", false, "", ""},
		{"watch not a bool", "watch: sometimes\njobs: []\n", false, "", "crontab.yaml:1: watch: must be true or false"},
		{"bad listen", "metrics: {listen: nowhere}\njobs: []\n", false, "", `crontab.yaml:1: metrics.listen: must be host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("crontab.yaml", []byte(tc.yaml), LoadOptions{Hostname: func() (string, error) { return "h", nil }})
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error %v, want %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Watch != tc.watch || cfg.Metrics.Listen != tc.listen {
				t.Fatalf("watch %v listen %q, want %v %q", cfg.Watch, cfg.Metrics.Listen, tc.watch, tc.listen)
			}
		})
	}
}

func TestGroupNeedsUser(t *testing.T) {
	_, err := Parse("crontab.yaml", []byte("jobs:\n  - name: a\n    schedule: \"@daily\"\n    command: \"true\"\n    group: adm\n"), LoadOptions{Hostname: func() (string, error) { return "h", nil }})
	if err == nil || !strings.Contains(err.Error(), `crontab.yaml:5: job "a": jobs[0].group: group needs user`) {
		t.Fatalf("error %v", err)
	}
	cfg, err := Parse("crontab.yaml", []byte("jobs:\n  - name: a\n    schedule: \"@daily\"\n    command: \"true\"\n    user: nobody\n    group: adm\n"), LoadOptions{Hostname: func() (string, error) { return "h", nil }})
	if err != nil || cfg.Jobs[0].User != "nobody" || cfg.Jobs[0].Group != "adm" {
		t.Fatalf("cfg %+v, err %v", cfg, err)
	}
}

func TestTLSSettings(t *testing.T) {
	opt := LoadOptions{Hostname: func() (string, error) { return "h", nil }}
	cfg, err := Parse("crontab.yaml", []byte(`backend:
  type: redis
  redis:
    url: "rediss://cache:6380/0"
    tls: {caFile: /etc/ca.pem, certFile: /etc/c.pem, keyFile: /etc/c.key, serverName: cache.internal}
  nats:
    passwordFile: /etc/nats.token
    tls: {insecureSkipVerify: true}
jobs: []
`), opt)
	if err != nil {
		t.Fatal(err)
	}
	want := storetls.Settings{CAFile: "/etc/ca.pem", CertFile: "/etc/c.pem", KeyFile: "/etc/c.key", ServerName: "cache.internal"}
	nats := cfg.Backend.sections["nats"].(natsclaim.Settings)
	if cfg.Backend.sections["redis"].(redisclaim.Settings).TLS != want || !nats.TLS.InsecureSkipVerify || nats.PasswordFile != "/etc/nats.token" ||
		cfg.Backend.sections["postgres"].(pgclaim.Settings).TLS.Enabled() {
		t.Fatalf("backend %+v", cfg.Backend)
	}
	_, err = Parse("crontab.yaml", []byte("backend:\n  postgres:\n    tls: {certFile: /c.pem}\njobs: []\n"), opt)
	if err == nil || !strings.Contains(err.Error(), "crontab.yaml:3: backend.postgres.tls.certFile: certFile needs keyFile") {
		t.Fatalf("error %v", err)
	}
}
