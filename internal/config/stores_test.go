package config

// The crontab's backend sections are the registered stores'; the tests
// check the loader with every store of the binary.
import (
	_ "github.com/anarchon/anarchon/internal/natsclaim"
	_ "github.com/anarchon/anarchon/internal/pgclaim"
	_ "github.com/anarchon/anarchon/internal/rabbitclaim"
	_ "github.com/anarchon/anarchon/internal/redisclaim"
	_ "github.com/anarchon/anarchon/internal/sqliteclaim"
)
