package natsclaim_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/store"
)

func parseSection(t *testing.T, section string) (*config.Config, error) {
	t.Helper()
	crontab := "backend:\n  type: nats\n  nats:\n" + section + "jobs:\n  - {name: a, schedule: \"@every 1m\", command: \"true\"}\n"
	return config.Parse("c.yaml", []byte(crontab), config.LoadOptions{Environ: []string{}, Hostname: func() (string, error) { return "h", nil }})
}

func TestSectionReplicasAndPlacement(t *testing.T) {
	cfg, err := parseSection(t, "    replicas: 3\n    placementCluster: east\n    placementTags: [ssd, \"az:a\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Backend.Store.(natsclaim.Settings)
	if got.Replicas != 3 || got.PlacementCluster != "east" || !reflect.DeepEqual(got.PlacementTags, []string{"ssd", "az:a"}) {
		t.Errorf("got %+v", got)
	}
	cfg, err = parseSection(t, "    url: nats://a:4222\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Backend.Store.(natsclaim.Settings); got.Replicas != 0 || got.PlacementCluster != "" || got.PlacementTags != nil {
		t.Errorf("defaults: got %+v, want replicas 0 (chosen at open) and no placement", got)
	}
	for section, want := range map[string]string{
		"    replicas: 7\n":                "c.yaml:4: backend.nats.replicas: must be between 1 and 5, not 7",
		"    replicas: 0\n":                "backend.nats.replicas: must be between 1 and 5, not 0",
		"    placementTags: [ssd, \"\"]\n": "c.yaml:4: backend.nats.placementTags[1]: must not be empty",
		"    placementTags: ssd\n":         "backend.nats.placementTags: must be a list of strings, not a string",
		"    placementCluster: \"\"\n":     "backend.nats.placementCluster: must not be empty",
	} {
		_, err := parseSection(t, section)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want an error saying %q, got %v", section, want, err)
		}
	}
}

// validate asks the registered driver's Check, which prints the topology.
func TestValidatePrintsTopology(t *testing.T) {
	p := newPlace(t)
	cfg, err := parseSection(t, "    url: "+p.url+"\n    stream: "+p.stream+"\n")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := store.Lookup("nats")
	if !ok || d.Check == nil {
		t.Fatal("the nats driver has no Check")
	}
	note, err := d.Check(t.Context(), cfg.Backend.Store)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(note, "nats: single server ") || !strings.Contains(note, "stream "+p.stream+": not created yet; anarchond creates it with 1 replica(s)") {
		t.Errorf("validate's note:\n%s", note)
	}
	cfg, err = parseSection(t, "    url: "+p.url+"\n    stream: "+p.stream+"\n    replicas: 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Check(t.Context(), cfg.Backend.Store); !claim.IsPermanent(err) || !strings.Contains(err.Error(), "single server") {
		t.Errorf("replicas 3 on a single server: validate must refuse it, got %v", err)
	}
}
