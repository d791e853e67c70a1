package llm_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/switchboard/switchboard/services/llm"
	"github.com/switchboard/switchboard/services/llm/llmtest"
)

// The captured body is the one the server received, and Encode runs on
// exactly that body (the stored request is its gzip).
func TestCaptureEncodesTheBodySent(t *testing.T) {
	t.Parallel()
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			p, srv := setup(t, api, 0)
			srv.Enqueue(llmtest.Reply{Text: "ok"})
			c := &llm.Capture{Encode: func(b []byte) []byte { return append([]byte("enc:"), b...) }}
			if _, err := p.Complete(llm.WithCapture(context.Background(), c), userRequest("hello"), nil); err != nil {
				t.Fatal(err)
			}
			body, _ := c.Body()
			reqs := srv.Requests()
			if len(reqs) != 1 || !bytes.Equal(reqs[0].Body, body) {
				t.Fatalf("captured body differs from the one received (%d requests)", len(reqs))
			}
			for range 2 { // Encoded can be asked again
				if got := c.Encoded(); !bytes.Equal(got, append([]byte("enc:"), body...)) {
					t.Fatalf("Encoded = %.40q…, want enc: and the body", got)
				}
			}
			if (&llm.Capture{}).Encoded() != nil {
				t.Error("a capture without a request has an encoded body")
			}
		})
	}
}
