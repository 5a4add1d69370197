package runner

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/supervise"
)

// BenchmarkJobStart runs `true` (args, no shell) start to finish through the
// runner, on the in-memory store: the cost of a job's start and end on the
// daemon's side, with the installed anarchon-supervise as the guard (the
// job forked by the daemon) and as each job's supervisor (the fallback).
// cpu-ms/op is the CPU of this process and of its children (the job, the
// supervisor) per job.
func BenchmarkJobStart(b *testing.B) {
	small := smallSupervisor(b)
	guard, err := StartGuard([]string{small, supervise.GuardFlag}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { guard.Close() })
	for _, mode := range []struct {
		name  string
		guard *Guard
	}{{"guard", guard}, {"supervisor", nil}} {
		b.Run(mode.name, func(b *testing.B) {
			r, _ := newRunner(b, &store{}, clock.Real{})
			r.Log = nil
			r.Supervisor, r.Guard = []string{small, "--"}, mode.guard
			job := shellJob("bench", "")
			job.Args = []string{"/bin/true"}
			e := execution(job)
			before := cpu()
			b.ResetTimer()
			for b.Loop() {
				if rep := r.Run(context.Background(), e); rep.ExitCode != 0 || rep.Err != nil {
					b.Fatalf("report %+v", rep)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpu()-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpu is the user and system CPU of this process and its reaped children.
func cpu() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}
