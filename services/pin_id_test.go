package services_test

import (
	"strings"
	"testing"

	"github.com/switchboard/switchboard/services"
)

// TestPinByBlockID: a pin by block id reads and writes as PATH#@ID, is
// the same pin only with the same id, and is refused with block or lines
// beside it or an id that is not one.
func TestPinByBlockID(t *testing.T) {
	p, err := services.ParsePin("notes.md#@b12")
	if err != nil || p.ID != "b12" || p.Block != "" || p.String() != "notes.md#@b12" {
		t.Fatalf("ParsePin: %+v %v", p, err)
	}
	if p.Same(services.Pin{Path: "notes.md", ID: "b2"}) || !p.Same(services.Pin{Path: "notes.md", ID: "b12"}) {
		t.Fatal("Same compares ids")
	}
	for _, c := range []struct {
		pin  services.Pin
		want string
	}{
		{services.Pin{Path: "notes.md", ID: "b1", Block: "Goals"}, `"id" alone`},
		{services.Pin{Path: "notes.md", ID: "x1"}, `"id" "x1" is not a block id`},
		{services.Pin{Path: "notes.md", ID: "b0"}, `is not a block id`},
	} {
		if err := c.pin.Validate(); err == nil || !strings.Contains(services.ErrorMessage(err), c.want) {
			t.Errorf("%+v: %v, want %q", c.pin, err, c.want)
		}
	}
	if _, err := services.ParseContextManifest([]byte(`{"version":1,"pins":[{"path":"notes.md","id":"b2"}]}`)); err != nil {
		t.Fatal(err)
	}
}
