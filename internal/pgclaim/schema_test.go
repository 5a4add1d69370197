package pgclaim

import (
	"testing"

	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// TestMigrationsReleased checks that no released migration's text has
// changed (sqlclaim.ChangedMigrations).
func TestMigrationsReleased(t *testing.T) {
	released := []string{
		"a3ac1ef72060c18c73923cb39f69502ef335e0a21be0cf505bec3628346800fd",
		"615245d80a076f38b05977d11ba2d0e2208795e69d60f55d61a1a246f2bd64c6",
		"4048e2c8c932548b3be25741faf814b3166e2e8de43984c6a755a4a3d34f46cf",
		"28223ea8736626033ce4be3666903bdfeef6648feb290d7b3b13475e076bab9e",
		"adca56e99a8f8e197f6f533723538c02211b00a08d4cb2c414520c6e98d101d7",
		"80af65a683395c164a8fd113bff2fb04ab5e6db191df8a5a9b96b5d5366415c6",
		"0b1db5dde2987b803b734a4e1dcf024350d069f80ee263ea50b64e23a650aa3f",
		"a799eda6dcd665fb47dfcbda33db12924f9e227673889154f690e36274c68d68",
		"074b59da8f0f41002bbce8b7992fe63dbe0671936c6eafb5fc562fac6e48cd69",
	}
	for _, c := range sqlclaim.ChangedMigrations(migrations, released) {
		t.Error(c)
	}
}
