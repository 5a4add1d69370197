package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/sqliteclaim"
)

// packagedCrontab is the crontab the packages install as
// /etc/anarchon/anarchon.yaml.
var packagedCrontab = filepath.Join("..", "..", "packaging", "anarchon.yaml")

// exampleBlock is one commented example of a crontab: the lines after a
// "# Example" comment, up to the first line that is not a comment at the
// same indentation, with their "# " prefix.
type exampleBlock struct {
	first, last int    // 0-based line indexes of the commented YAML
	prefix      string // indentation and "# "
}

// exampleBlocks finds every commented example in lines.
func exampleBlocks(lines []string) []exampleBlock {
	var blocks []exampleBlock
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "# Example") {
			continue
		}
		prefix := lines[i][:len(lines[i])-len(trimmed)] + "# "
		j := i + 1
		for j < len(lines) && !isYAMLComment(lines[j], prefix) { // the example's prose
			j++
		}
		b := exampleBlock{first: j, prefix: prefix}
		for j < len(lines) && isYAMLComment(lines[j], prefix) {
			j++
		}
		b.last = j - 1
		blocks = append(blocks, b)
		i = b.last
	}
	return blocks
}

// isYAMLComment reports whether line is prefix followed by commented YAML:
// a list item or a "key:" (prose holds spaces before its first colon).
func isYAMLComment(line, prefix string) bool {
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return false
	}
	rest = strings.TrimLeft(rest, " ")
	if strings.HasPrefix(rest, "- ") {
		return true
	}
	key, _, ok := strings.Cut(rest, ":")
	return ok && key != "" && !strings.ContainsAny(key, " \t")
}

// uncomment returns lines with the blocks' "# " prefixes removed.
func uncomment(lines []string, blocks ...exampleBlock) string {
	out := append([]string(nil), lines...)
	indent := func(b exampleBlock) string { return strings.TrimSuffix(b.prefix, "# ") }
	for _, b := range blocks {
		for i := b.first; i <= b.last; i++ {
			out[i] = indent(b) + strings.TrimPrefix(out[i], b.prefix)
		}
	}
	return strings.Join(out, "\n")
}

// TestPackagedCrontab keeps the packaged crontab valid as installed, and
// valid once any of its commented examples is uncommented (one at a time,
// and all together), as its comments promise.
func TestPackagedCrontab(t *testing.T) {
	data, err := os.ReadFile(packagedCrontab)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(packagedCrontab, data, opts(nil))
	if err != nil {
		t.Fatalf("as installed:\n%v", err)
	}
	if cfg.Backend.Store.(sqliteclaim.Settings).Path != "/var/lib/anarchon/anarchon.db" || len(cfg.Jobs) != 0 {
		t.Errorf("as installed: got %+v", cfg)
	}
	lines := strings.Split(string(data), "\n")
	blocks := exampleBlocks(lines)
	if len(blocks) < 2 {
		t.Fatalf("found %d commented examples, want the 2 jobs", len(blocks))
	}
	check := func(name string, want int, bs ...exampleBlock) {
		t.Helper()
		text := uncomment(lines, bs...)
		cfg, err := Parse(packagedCrontab, []byte(text), opts(nil))
		if err != nil {
			t.Errorf("%s uncommented is invalid:\n%v\n--- crontab:\n%s", name, err, text)
			return
		}
		if len(cfg.Jobs) != want || len(cfg.Warnings) != 0 {
			t.Errorf("%s uncommented: %d jobs (want %d), warnings %q", name, len(cfg.Jobs), want, cfg.Warnings)
		}
	}
	for _, b := range blocks {
		check(fmt.Sprintf("the example at line %d", b.first+1), 1, b)
	}
	check("every example", len(blocks), blocks...)
}
