// Command anarchon-supervise is the supervising parent of anarchond's jobs
// (see internal/supervise): a separate binary, beside anarchond, because it
// starts once per job and a program importing only the standard library
// starts in a fraction of anarchond's time.
package main

import (
	"os"

	"github.com/anarchon/anarchon/internal/supervise"
)

func main() { os.Exit(supervise.Main(os.Args[1:])) }
