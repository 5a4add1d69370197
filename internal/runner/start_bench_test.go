package runner

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/logging"
	"github.com/anarchon/anarchon/internal/supervise"
)

// BenchmarkJobStart runs `true` (args, no shell) start to finish through the
// runner, on the in-memory store, as the daemon runs it: logging JSON at
// info and recording each attempt (Records): the cost of a job's start and
// end on the daemon's side, with the installed anarchon-supervise as the
// guard (the job forked by the daemon) and as each job's supervisor (the
// fallback). cpu-ms/op is the CPU of this process and of its children (the
// job, the supervisor) per job, self-cpu-ms/op this process's alone.
func BenchmarkJobStart(b *testing.B) {
	small := smallSupervisor(b)
	guard, err := StartGuard([]string{small, supervise.GuardFlag}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { guard.Close() })
	log, err := logging.New(io.Discard, "info", "json")
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name  string
		guard *Guard
	}{{"guard", guard}, {"supervisor", nil}} {
		b.Run(mode.name, func(b *testing.B) {
			r, _ := newRunner(b, &store{}, clock.Real{})
			r.Log = log
			r.Supervisor, r.Guard = []string{small, "--"}, mode.guard
			if r.Records, err = OpenRecords(b.TempDir(), nil); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { r.Records.Close() })
			job := shellJob("bench", "")
			job.Args = []string{"/bin/true"}
			e := execution(job)
			before, selfBefore := cpu(), selfCPU()
			b.ResetTimer()
			for b.Loop() {
				if rep := r.Run(context.Background(), e); rep.ExitCode != 0 || rep.Err != nil {
					b.Fatalf("report %+v", rep)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpu()-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64((selfCPU()-selfBefore).Microseconds())/1000/float64(b.N), "self-cpu-ms/op")
		})
	}
}

// cpu is the user and system CPU of this process and its reaped children.
func cpu() time.Duration {
	return rusage(syscall.RUSAGE_SELF) + rusage(syscall.RUSAGE_CHILDREN)
}

// selfCPU is the user and system CPU of this process.
func selfCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
