// Package doccheck holds a test, run by go test, that keeps the project's
// documents and their references followable: every relative link in
// README.md and docs/*.md names a file that exists and, with a #fragment,
// an anchor of that file (a GitHub heading slug or an <a id>/<a name>);
// every reference into the spec, docs/spec.md#<anchor>, in a Go file names
// an anchor of the spec; and the retired form of reference to the original
// design spec's sections is gone outside docs/spec.md.
package doccheck
