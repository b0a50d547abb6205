package controllerruntime

import "time"

// SetReadTimeout sets the read timeout for a test and returns the old one.
func SetReadTimeout(d time.Duration) time.Duration {
	return time.Duration(readTimeout.Swap(int64(d)))
}

// NewOwnedPodSource is Checkers.ForOwner's source, for its tests.
var NewOwnedPodSource = newOwnedPodSource
