// Command anarchon-supervise keeps the processes of anarchond's jobs from
// outliving the daemon (see internal/supervise): `anarchon-supervise
// --guard` is the daemon's job guard, `anarchon-supervise -- argv...` a
// job's supervising parent. A separate binary, beside anarchond, because a
// program importing only the standard library starts in a fraction of
// anarchond's time.
package main

import (
	"os"

	"github.com/anarchon/anarchon/internal/supervise"
)

func main() { os.Exit(supervise.Main(os.Args[1:])) }
