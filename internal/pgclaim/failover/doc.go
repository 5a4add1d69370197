// Package failover holds the PostgreSQL failover test: anarchond daemons,
// in this test process, on a private primary and its streaming standby;
// the primary is killed as a host crash would kill it and the standby
// promoted, and the test accounts for every slot of the jobs: run once,
// run twice, or missed, with the gap the failover cost. The package has
// no code outside its test.
package failover
