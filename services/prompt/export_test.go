package prompt

// TableMiB is the size of encoding enc's rank table once loaded (outside the
// Go heap where the platform allows, so heap figures do not show it).
func TableMiB(enc string) float64 {
	e, err := encoders[enc].load()
	if err != nil {
		return 0
	}
	return float64(4*(len(e.slots)+len(e.off))+cap(e.data)) / (1 << 20)
}
