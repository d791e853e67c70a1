package media_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/switchboard/switchboard/services"
	"github.com/switchboard/switchboard/services/media"
	"github.com/switchboard/switchboard/services/tools"
)

// BenchmarkSave measures storing an attachment: SHA-256, the type sniffed,
// an atomic write in the workspace (new content), or the check that finds
// it stored (the same content again).
func BenchmarkSave(b *testing.B) {
	for _, size := range []int{256 << 10, 4 << 20, 20 << 20} {
		for _, dup := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dKiB/dup=%v", size>>10, dup), func(b *testing.B) {
				spaces := tools.NewWorkspacesWith(b.TempDir(), tools.WriteLimits{Workspace: 1 << 40})
				defer spaces.Close()
				s := media.New(spaces.For, 32<<20)
				data := make([]byte, size)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if !dup {
						binary.LittleEndian.PutUint64(data, uint64(i)) // new content each time
					}
					if _, err := s.Save(context.Background(), "global", services.Upload{Name: "f.bin", Data: data}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
