package podsource

// HeldEventsRemembered is how many holds h remembers, for the test of its
// bound.
func HeldEventsRemembered(h *HeldEvents) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.holds)
}
