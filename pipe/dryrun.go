package pipe

// dryRunHold caps the messages a dry run keeps hidden: polling pauses
// there, so watching a live queue never grows memory without bound.
const dryRunHold = 10000

// dryHold counts what a dry run keeps hidden instead of settling it. It
// has no lock: the pipe's guards it.
type dryHold struct {
	held int  // messages kept hidden until the stop
	full bool // the hold was reached (and said so)
}

// keep takes out of items those a dry run gives no verb (all but the
// releases of a stop: a Nak without delay) and counts them as held.
func (d *dryHold) keep(items []settle) []settle {
	kept := items[:0]
	for _, it := range items {
		if it.v == verbNak && it.delay == 0 {
			kept = append(kept, it) // released: shutdown
			continue
		}
		d.held++
	}
	return kept
}

// filled reports whether the hold has just been reached: true once.
func (d *dryHold) filled() bool {
	if d.full || d.held < dryRunHold {
		return false
	}
	d.full = true
	return true
}
