package pipe

// ConcurrencyFollower is an optional ability of a Target: the pipe tells
// it the number of batches it may have in flight when it starts and
// whenever its scaler changes it, so that the target keeps no more idle
// connections than that needs (the http target closes its idle
// keep-alive connections when the concurrency has halved). The pipe finds
// it by type assertion on its Target and its Enricher.
type ConcurrencyFollower interface {
	// FollowConcurrency is told the concurrency; it must not block.
	FollowConcurrency(n int)
}

// followConcurrency tells the stages that follow the concurrency that it
// is n.
func (p *Pipe) followConcurrency(n int) {
	for _, s := range []any{p.opt.Target, p.opt.Enricher} {
		if f, ok := s.(ConcurrencyFollower); ok && s != nil {
			f.FollowConcurrency(n)
		}
	}
}
