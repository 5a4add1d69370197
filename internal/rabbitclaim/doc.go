// Package rabbitclaim is the RabbitMQ claim-only backend
// (docs/spec.md#s3-2-rabbitmq): the one decision per run (job, slot) is a
// publish into a queue that holds at most one message, answered by a
// publisher confirm. It keeps no lease: when the winner dies, the run is not
// re-run (at-most-once).
//
// # Queues
//
//	<ns>.<job>.slot.<slot>  the run's gate: a classic queue, durable, not
//	                        exclusive, not auto-delete, declared with
//	                        x-max-length 1, x-overflow reject-publish and
//	                        x-expires slotTtlMs. It holds the winner's claim
//	                        message, or the slot's note (see Notes), until it
//	                        expires. Nobody ever consumes it.
//	                        A preparation sends it a primer of TTL 0, which
//	                        the broker drops at once (prepare.go).
//	<ns>.history            a stream queue (x-queue-type stream, x-max-age =
//	                        backend.retention, x-max-length-bytes,
//	                        x-stream-max-segment-size-bytes) of "claimed",
//	                        "finished" and "noted" records, read by status.
//
// GateQueue and HistoryQueue return the names.
//
// Gates are durable and the claim message is persistent, so the broker
// confirms a win only after the message is on disk and a gate survives a
// broker restart: a non-durable gate would vanish with the restart and the
// slot could be won a second time (two runs). The price is an fsync per won
// claim (see bench_test.go). Gates are not exclusive, so that every
// instance's connection can declare and publish to them.
//
// # The claim
//
// Claim first checks late with the instance's clock (Request.Now - slot >
// maxLate: late, no broker operation). Then, on a confirm channel that has
// no other publish in flight, it declares the gate and publishes the claim
// (JSON: token, instance, job, slot; message id = token) to the default
// exchange with mandatory set:
//
//	ack                            won(1): the gate was empty
//	nack                           lost: the gate is full (reject-publish),
//	                               with a claim or the slot's note
//	basic.return (312 NO_ROUTE)    unknown: the gate vanished between the
//	                               declare and the publish. A return arrives
//	                               before an ack that is still sent: a return
//	                               means "no queue", never "won"
//	channel/connection closed,     unknown: the claim may have reached the
//	ctx done after the publish,    gate; nobody can tell
//	publish write error
//	not connected, broker blocked  error wrapping ErrUnavailable: the claim
//	publishing, connection lost    was certainly not published, so the
//	before the publish, ctx done   scheduler may re-send it with the same
//	before the publish (no answer  token (IsTransient)
//	to the channel's open or the
//	gate's declare), declare
//	answered 404 (the queue's
//	record without a live queue:
//	its node down, or a racing
//	declare creating it)
//	declare refused 406            error wrapping ErrQueueConflict, naming the
//	                               queue and the differing argument (not
//	                               transient: another instance uses another
//	                               slotTtlMs, or a foreign queue has the name);
//	                               403/405 are plain errors
//
// ctx bounds the wait for the broker (30s when it has no deadline); the
// scheduler's claim timeout is the usual bound. It bounds every broker call
// too, although amqp091-go's calls (opening a channel, a declare, a
// channel's close) take no context and wait forever for a reply that was
// lost: on a connection that stays open (a blackhole that heals), nobody
// else would end them. See "Abandoned calls" below.
//
// Unknown is returned with a nil error and logged at warn: the scheduler
// treats it as lost and skips the run (docs/spec.md#s3-2-rabbitmq), and does
// not re-send a claim whose fate it cannot learn.
//
// Never consume or basic.get a gate: RabbitMQ's max-length counts ready
// messages only, so a consumed or unacked claim reopens the gate (two
// winners). Publishing does not reset x-expires; a declare (passive too)
// does, so a gate lives slotTtlMs after its last claim. Operators must not
// apply a policy with message-ttl, max-length or overflow to queues matching
// "<ns>.*": a message TTL would empty the gates.
//
// # Retention
//
// A gate is the store's only memory of a run, and it lives slotTtlMs after
// the last claim of that run. A claim after that wins again, so slotTtlMs
// must exceed maxLate + the largest clock skew + the longest pause
// (configuration validation refuses a maxLate above half of slotTtlMs).
//
// # Re-sent claims
//
// A gate cannot be read (reading reopens it), so the token of the message in
// it cannot be compared with the caller's. Instead each Backend keeps a
// bounded in-process book of the tokens it claimed, per (job, slot), kept for
// slotTtlMs:
//
//   - a token it won (ack): a re-send answers won(1) again. This is honest: a
//     token is random and lives only in the process that made it, so only
//     that process can re-send it, and this book is that process's memory of
//     its ack. A record exists only while the gate does (the gate lives at
//     least slotTtlMs after the claim that created the record).
//   - a token whose publish may have landed (connection lost or ctx done
//     after the publish): a re-send is decided by the gate again. An ack
//     means the gate was empty, so the first copy is certainly not in it, and
//     the re-send is the one winner: won(1). A nack means the gate is full,
//     perhaps with the first copy: unknown, never lost (it may be ours).
//   - a token that got a basic.return: the gate vanished while the run was
//     being claimed (deleted by hand, or expired), so the broker no longer
//     remembers who won; a re-send would create a fresh gate and could win a
//     second time. It answers unknown without touching the broker.
//
// # Results and status
//
// The gates hold no results, so the backend writes them to the history
// stream: a "claimed" record when a claim is won (written in the background,
// so that it adds no latency to the claim) and a "finished" record from
// Finish (waited for). A finished record carries the run's job, slot,
// attempt (1), instance, token, status, exit code (none when interrupted),
// started/finished (the runner's clock: a claim-only store has no clock of
// its own) and output tail. Finish records every result, also for a run
// this Backend never claimed (the token is the evidence), and accepts
// interrupted (the daemon's shutdown stopped the command; nobody re-runs it).
//
// ListRuns writes a marker record and then reads the stream with a
// short-lived consumer (prefetch, manual ack, x-stream-offset = now -
// backend.retention) until it reads its own marker: everything written
// before it, including this process's queued records, has then been seen.
// It joins the records per (job, slot): a finished record wins; a claimed
// record without one is a running run; a noted record is listed only when
// the slot has neither (see Notes). A record written twice (see below)
// counts once. ListQuery.Statuses selects among the joined runs before the
// limit. A run whose winner died is therefore
// shown running until it leaves the stream: claim-only backends have no
// lease to tell a dead runner from a slow one. Status reads the whole
// retained stream; consuming a stream is non-destructive and never touches
// the gates. If the stream exists with other retention arguments (another
// backend.retention), the backend keeps the existing ones and logs a
// warning; a queue of that name that is not a stream is an error.
//
// The records are written in order by one writer on a confirm channel of
// its own, retried until confirmed (or Close). A batch whose confirms do
// not arrive within 5s, or before a caller waiting for one of its records
// (Finish, ListRuns) gives up, loses its channel (abandoned as below), and
// its unconfirmed records are published again on a new channel, at once
// when the connection is restored: at least once, so a record may be in the
// stream twice. A Finish whose ctx ends first returns ctx's error at once;
// its record stays queued, and a re-sent Finish succeeds once the broker
// answers again.
//
// # Notes
//
// The backend is a claim.Recorder. Record publishes the note of a slot no
// attempt ran (skipped, missed, unknown) into the run's gate exactly as a
// claim is published (declare, persistent message of type "note",
// mandatory, confirm), so the gate holds whichever of the run's claims and
// notes reaches it first:
//
//	ack    true: the note holds the gate, and every later claim of the
//	       slot is nacked (lost). Its "noted" record (job, slot, instance,
//	       status, reason, held-by slot; finished = the note's time by the
//	       recording instance's clock, the store having none) is then
//	       written to the history stream and waited for
//	nack   false: a claim or an earlier note holds the gate; nothing is
//	       written, with one exception: when this Backend's own claim of
//	       the slot got no answer (unknown), the gate may hold that claim,
//	       which nobody runs, so the noted record is written all the same
//	       (status then shows the slot unknown unless a run of it is
//	       recorded)
//	return an error wrapping ErrUnavailable: the gate vanished after its
//	       declare; the note is stored nowhere
//	no confirm (the claim's "unknown" cases)
//	       an error: the note may hold the gate. Its noted record is
//	       queued all the same, for the same reason
//
// So a note is final and Record writes once, as a claim wins once, for as
// long as the gate lives: slotTtlMs after its last declare. A note of a
// slot whose gate has expired (older than slotTtlMs: every claim of it is
// late by then) makes a new gate and is written even when the slot was
// claimed, or noted, before; status then lists the slot's run rather than
// the note (a claimed or finished record wins over a noted one, whatever
// their order), or the first note of the slot: one row per slot. The
// history stream's retention (x-max-age, x-max-length-bytes) ages notes
// out as it does runs; the backend has no Prune.
//
// A won claim's claimed record is written in the background, so status on
// another instance lists that run a few milliseconds after the win; the
// conformance races' second instances wait for their own history writes
// after a win before they answer (rabbitclaim_test.go), so that the
// listing right after the race is complete. Binaries that predate notes
// skip noted records in status, and their claims of a noted slot lose.
//
// # TLS and credentials
//
// Options.TLS (backend.rabbitmq.tls) is the client TLS configuration of
// every dial. With an amqps:// URL it replaces the one amqp091-go would
// derive from the URL. With an amqp:// URL the backend does not fall back
// to plain text: it dials amqps:// on the same host and port (5672 when the
// URL names none), so a broker that only listens in plain text fails the
// TLS handshake, and a TLS listener on another port must be named in the
// URL. Options.PasswordFile (backend.rabbitmq.passwordFile) names a file
// whose content, without its trailing newline, replaces the URL's password
// (the URL's user, or guest when it names none). Neither the URL's nor the
// file's password appears in errors or logs.
//
// # Connection loss
//
// amqp091-go's own recovery is not used (it would re-declare every gate it
// ever declared). The backend watches the connection and reconnects with
// backoff, logging "rabbitmq connection lost; reconnecting" and "rabbitmq
// connection restored" once per change. Claims while it is down fail with
// ErrUnavailable (not published: the scheduler re-sends with the same token,
// which is safe); a claim whose publish was in flight answers unknown. Each
// reconnect attempt (TCP connect, handshake, history declare) is bounded:
// 2s at first, doubling with each failed attempt up to twice the dial
// timeout (the URL's connection_timeout, else 10s), so that an attempt
// whose handshake replies were lost does not hold the reconnection long
// after the network is back.
//
// # Abandoned calls
//
// A broker call whose ctx ends first returns at once (a claim: a transient
// error before the publish, unknown after it) and the call is abandoned:
// the backend closes its channel in the background, and when the broker
// does not answer that close within 2s either, it drops the whole
// connection (closes the TCP connection without the AMQP close handshake),
// logging "rabbitmq connection dropped: the broker did not answer". amqp091
// then fails every call pending on it, which frees the claims' slots and
// goroutines, and the backend reconnects as above. A broker that is merely
// slow answers the close, and only that channel is lost. Close waits 2s
// for the broker's close-ok, then drops the connection too.
package rabbitclaim
