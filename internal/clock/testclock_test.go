//go:build anarchon_testclock

package clock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFromEnvSkewsByTheFilesOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skew")
	if err := os.WriteFile(path, []byte("-90000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(TestClockEnv, path)
	f := NewFake(time.Unix(1000, 0))
	c := FromEnv(f)
	if got, want := c.Now(), time.Unix(910, 0); !got.Equal(want) {
		t.Fatalf("Now() = %v, want %v", got, want)
	}
	if err := os.WriteFile(path, []byte("2500"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.(*fileSkew).load()
	if got, want := c.Now(), time.Unix(1002, 5e8); !got.Equal(want) {
		t.Fatalf("after a jump Now() = %v, want %v", got, want)
	}
}
