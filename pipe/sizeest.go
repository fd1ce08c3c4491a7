package pipe

// sizeFloor is the least a message is reckoned to take when reserving
// budget for a receive.
const sizeFloor = 256

// sizeEstimate is the running size of the messages received, for the
// budget reservations of the receives: the mean of the first receive,
// then an exponential moving average (weight 0.2) of each receive's mean.
// It has no lock: the pipe's guards it.
type sizeEstimate struct {
	avg     float64
	samples int
}

// add notes a receive of n messages of bytes in all (n > 0).
func (s *sizeEstimate) add(n, bytes int) {
	s.samples++
	avg := float64(bytes) / float64(n)
	if s.samples == 1 {
		s.avg = avg
		return
	}
	s.avg = 0.8*s.avg + 0.2*avg
}

// known reports whether a receive has told how large messages are.
func (s *sizeEstimate) known() bool { return s.samples > 0 }

// reserve is the bytes to reserve for a receive of n messages.
func (s *sizeEstimate) reserve(n int) int64 {
	return int64(n) * max(int64(s.avg), sizeFloor)
}
