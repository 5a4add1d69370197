package pgclaim

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// A DSN may name several hosts (host=a,b,c or postgres://a,b,c/db): pgx
// tries them in order and the backend keeps a connection only on the one
// that accepts writes (writable), which is the primary of a streaming
// replication cluster. After a failover the next connection lands on the
// promoted standby.

// Why a server was refused by writable.
var (
	errStandby  = errors.New("is a standby (in recovery): it accepts no writes")
	errReadOnly = errors.New("is read-only (default_transaction_read_only is on): it accepts no writes")
)

// writableSQL reads whether the server is a standby and whether the
// session is read-only (a standby's sessions are too).
const writableSQL = "SELECT pg_is_in_recovery(), current_setting('transaction_read_only')"

// writable is the ValidateConnect of every connection: the server must
// accept writes, neither a standby nor read-only (target_session_attrs
// read-write and primary at once, with a reason libpq's lack).
func writable(ctx context.Context, c *pgconn.PgConn) error {
	res, err := c.Exec(ctx, writableSQL).ReadAll()
	if err != nil {
		return err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 2 {
		return fmt.Errorf("unexpected answer to %q", writableSQL)
	}
	row := res[0].Rows[0]
	switch {
	case string(row[0]) == "t":
		return errStandby
	case string(row[1]) == "on":
		return errReadOnly
	}
	return nil
}

// refusedWrites reports whether err says that no host accepted writes.
func refusedWrites(err error) bool {
	return errors.Is(err, errStandby) || errors.Is(err, errReadOnly)
}

// explainConnect rewrites a failed connection whose hosts answered but
// none accepts writes: it names each host with what it said, and what to
// do. Other errors are returned as they are.
func explainConnect(err error) error {
	if err == nil || !refusedWrites(err) {
		return err
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	var hosts []string
	if j, ok := ce.Unwrap().(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			hosts = append(hosts, strings.Replace(e.Error(), "ValidateConnect failed: ", "", 1))
		}
	} else {
		hosts = append(hosts, strings.Replace(ce.Unwrap().Error(), "ValidateConnect failed: ", "", 1))
	}
	return &noPrimaryError{hosts: hosts, err: err}
}

// noPrimaryError is a connection that found no host accepting writes.
type noPrimaryError struct {
	hosts []string // "addr (host): what it said"
	err   error
}

func (e *noPrimaryError) Error() string {
	return fmt.Sprintf("no host of backend.postgres.dsn accepts writes: %s. Claims are written to the primary: "+
		"name every host of the cluster in the DSN (host=a,b,c; the backend connects to the one that accepts writes), "+
		"and if the primary is gone, promote a standby (pg_ctl promote, or your failover manager)",
		strings.Join(e.hosts, "; "))
}

func (e *noPrimaryError) Unwrap() error { return e.err }

// sqlstateReadOnly is read_only_sql_transaction: a write sent to a
// read-only session (a standby's, or default_transaction_read_only).
const sqlstateReadOnly = "25006"

// readOnlyAnswer drops the pool's connections when err is the answer of a
// read-only server (SQLSTATE 25006): the session that answered is on a
// server that no longer accepts writes (a pooler in front of a standby,
// default_transaction_read_only turned on), and so, most likely, are its
// pool mates. Connections in use close when they are released; the next
// call connects again, to a server that accepts writes (writable). The
// error says so.
func (b *Backend) readOnlyAnswer(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != sqlstateReadOnly {
		return err
	}
	b.pool.Reset()
	return fmt.Errorf("%w (the server accepts no writes now: its connections are dropped, and the next call connects to a host of the DSN that does)", err)
}

// tsaPattern finds target_session_attrs in a key=value DSN.
var tsaPattern = regexp.MustCompile(`(?:^|\s)target_session_attrs\s*=\s*'?([^\s']*)`)

// checkTargetSessionAttrs refuses a target_session_attrs (in the DSN, or
// PGTARGETSESSIONATTRS) that asks for a server that cannot take the
// claims' writes; "" when it is fine or not set.
func checkTargetSessionAttrs(dsn string) string {
	v := os.Getenv("PGTARGETSESSIONATTRS")
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil && u.Query().Has("target_session_attrs") {
			v = u.Query().Get("target_session_attrs")
		}
	} else if m := tsaPattern.FindStringSubmatch(dsn); m != nil {
		v = m[1]
	}
	switch v {
	case "", "any", "read-write", "primary":
		return ""
	}
	return fmt.Sprintf("target_session_attrs=%s asks for a server that accepts no writes, and every claim writes: "+
		"use target_session_attrs=read-write (or leave it out: the backend keeps connections only on a server that accepts writes)", v)
}
