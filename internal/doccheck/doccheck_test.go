package doccheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// specPath is the contract, relative to the repository's root.
const specPath = "docs/spec.md"

// oldRef is the retired form of a reference to the spec, split so that
// this file does not contain it.
var oldRef = "SPEC " + "§"

var (
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"`)
	goSpecRef  = regexp.MustCompile(regexp.QuoteMeta(specPath) + `#([A-Za-z0-9_-]+)`)
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// root is the repository's root: the nearest directory above the test's
// with a go.mod.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// markdownFiles are README.md and docs/*.md, relative to root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// line is one line of a Markdown file outside fenced code blocks, with
// its code spans blanked out.
type line struct {
	n    int
	text string
}

// proseLines reads the lines of a Markdown file that are not inside a
// fenced code block.
func proseLines(path string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	fence := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trim := strings.TrimLeft(text, " ")
		if fence != "" {
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
			fence = trim[:3]
			continue
		}
		out = append(out, line{n: n, text: text})
	}
	return out, sc.Err()
}

// slug is GitHub's anchor for a heading's text: lower case, markup and
// punctuation dropped (letters, digits, '-', '_' and spaces kept), each
// space a '-'.
func slug(heading string) string {
	heading = mdLinkText.ReplaceAllString(heading, "$1")
	heading = htmlTag.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a Markdown file: its headings' slugs
// (repeats numbered -1, -2, … as GitHub does) and its <a id>/<a name>.
func anchors(path string) (map[string]bool, error) {
	lines, err := proseLines(path)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	seen := map[string]int{}
	addHeading := func(text string) {
		s := slug(text)
		if k := seen[s]; k > 0 {
			set[fmt.Sprintf("%s-%d", s, k)] = true
		} else {
			set[s] = true
		}
		seen[s]++
	}
	for i, l := range lines {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			set[m[1]] = true
		}
		if m := atxHeading.FindStringSubmatch(l.text); m != nil {
			addHeading(m[2])
			continue
		}
		// A setext heading: a text line underlined by = or -.
		if i+1 < len(lines) && lines[i+1].n == l.n+1 && strings.TrimSpace(l.text) != "" {
			u := strings.TrimSpace(lines[i+1].text)
			if u != "" && (strings.Trim(u, "=") == "" || strings.Trim(u, "-") == "") &&
				!strings.HasPrefix(strings.TrimSpace(l.text), "|") && !strings.HasPrefix(strings.TrimSpace(l.text), "-") {
				addHeading(l.text)
			}
		}
	}
	return set, nil
}

// checker resolves references and remembers each file's anchors.
type checker struct {
	root    string
	anchors map[string]map[string]bool // by path relative to root
}

// resolve checks a reference to target#frag, target relative to root ("" for
// the referring file, from). It returns what is wrong, or "".
func (c *checker) resolve(from, target, frag string) string {
	if target == "" {
		target = from
	}
	info, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(target)))
	if err != nil {
		return fmt.Sprintf("no file %s", target)
	}
	if frag == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(target, ".md") {
		return fmt.Sprintf("%s is not a Markdown file, so #%s names no anchor", target, frag)
	}
	set, ok := c.anchors[target]
	if !ok {
		set, err = anchors(filepath.Join(c.root, filepath.FromSlash(target)))
		if err != nil {
			return err.Error()
		}
		c.anchors[target] = set
	}
	if !set[frag] {
		return fmt.Sprintf("no anchor #%s in %s", frag, target)
	}
	return ""
}

// relative reports whether a link target is a path in the repository
// rather than a URL with a scheme (https:, mailto:).
func relative(target string) bool {
	if strings.HasPrefix(target, "//") {
		return false
	}
	u, err := url.Parse(target)
	return err != nil || u.Scheme == ""
}

func TestMarkdownLinks(t *testing.T) {
	root := root(t)
	c := &checker{root: root, anchors: map[string]map[string]bool{}}
	links := 0
	for _, file := range markdownFiles(t, root) {
		lines, err := proseLines(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			text := codeSpan.ReplaceAllStringFunc(l.text, func(s string) string { return strings.Repeat(" ", len(s)) })
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
				targets = append(targets, m[1])
			}
			if m := refDef.FindStringSubmatch(text); m != nil {
				targets = append(targets, m[1])
			}
			for _, ref := range targets {
				if !relative(ref) {
					continue
				}
				links++
				path, frag, _ := strings.Cut(ref, "#")
				if p, err := url.PathUnescape(path); err == nil {
					path = p
				}
				target := ""
				if path != "" {
					if strings.HasPrefix(path, "/") {
						t.Errorf("%s:%d: link %s: an absolute path; link relative to the file", file, l.n, ref)
						continue
					}
					target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
				}
				if why := c.resolve(file, target, frag); why != "" {
					t.Errorf("%s:%d: broken link %s: %s", file, l.n, ref, why)
				}
			}
		}
	}
	if links == 0 {
		t.Error("no relative link found in README.md or docs/*.md: is the pattern still the one in use?")
	}
	t.Logf("%d relative links checked", links)
}

// walk calls fn for every file under root with one of exts, skipping
// hidden directories.
func walk(t *testing.T, root string, exts []string, fn func(rel string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains(exts, filepath.Ext(p)) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fn(filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCodeSpecReferences(t *testing.T) {
	root := root(t)
	c := &checker{root: root, anchors: map[string]map[string]bool{}}
	refs := 0
	walk(t, root, []string{".go", ".lua"}, func(rel string, data []byte) {
		for i, text := range strings.Split(string(data), "\n") {
			for _, m := range goSpecRef.FindAllStringSubmatch(text, -1) {
				refs++
				if why := c.resolve(rel, specPath, m[1]); why != "" {
					t.Errorf("%s:%d: broken reference %s: %s", rel, i+1, m[0], why)
				}
			}
		}
	})
	if refs == 0 {
		t.Errorf("no %s# reference found in any Go or Lua file: is the pattern still the one in use?", specPath)
	}
}

func TestNoOldSpecReferences(t *testing.T) {
	root := root(t)
	walk(t, root, []string{".go", ".lua", ".md"}, func(rel string, data []byte) {
		if rel == specPath {
			return
		}
		for i, text := range strings.Split(string(data), "\n") {
			if strings.Contains(text, oldRef) {
				t.Errorf("%s:%d: %q: refer to the spec as %s#<anchor> instead", rel, i+1, strings.TrimSpace(text), specPath)
			}
		}
	})
}
