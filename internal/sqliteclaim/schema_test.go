package sqliteclaim

import (
	"testing"

	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// TestMigrationsReleased checks that no released migration's text has
// changed (sqlclaim.ChangedMigrations).
func TestMigrationsReleased(t *testing.T) {
	released := []string{
		"64ac655b590a2f1a35aa93f00ba27076ee2d4d1c787279a883c4819c5a9fdb55",
		"5163e1844ee7f3890b9b2e4e30e5b8422bccbddaee6bb78d61268ebd5e3c60f0",
		"792b92df19ee725eff9dca25964cece74ebcf9ff069012428534248c8af96ae0",
		"599dd2683b3ff60e1d6ae83d11826c12a8751703ae9b1852905a472100da535d",
		"fb5bc0bc192d1dc99d5bfaccc8b2603375a6802d3e9c599407f1fcbb2e54dcf1",
	}
	for _, c := range sqlclaim.ChangedMigrations(migrations, released) {
		t.Error(c)
	}
}
