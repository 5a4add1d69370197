// Command anarchond is the leaderless cluster-wide cron daemon.
package main

import (
	"os"

	"github.com/anarchon/anarchon/internal/cli"
)

func main() { os.Exit(cli.Run()) }
