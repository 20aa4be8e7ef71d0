package lease

// Scans is how many times the pool scanned the store for a block to claim.
func (p *Pool) Scans() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.scans
}
