//go:build !anarchon_testclock

package clock

// FromEnv returns base. Only a binary built with the anarchon_testclock
// build tag (the chaos harness's) lets the environment skew its clock; see
// testclock.go.
func FromEnv(base Clock) Clock { return base }

// TestClockEnabled is false: a release binary does not read TestClockEnv.
const TestClockEnabled = false
