package httpapi

// Hooks for the external tests (package httpapi_test, which start real
// nodes through appliance/nodetest): the limits they test against and the
// insides they check.

const (
	HintsPerMinute = hintsPerMinute
	MaxEnlistMACs  = maxEnlistMACs
	MaxWaiters     = maxWaiters
)

// SharedList is the encoded full machine list every request for it
// shares: the same answer (same) until the data changes.
func (s *Server) SharedList() (same any, body []byte, err error) {
	a, err := s.machines.fullList(s.cfg.DB)
	if err != nil {
		return nil, nil, err
	}
	return a, a.body, nil
}

// Waiters is the number of blocking queries the server holds.
func (s *Server) Waiters() int64 { return s.waiters.Load() }

// SetMaxLocationEntry lowers the size past which a placement goes in
// steps, until the returned function restores it.
func SetMaxLocationEntry(n int) (restore func()) {
	old := maxLocationEntry
	maxLocationEntry = n
	return func() { maxLocationEntry = old }
}
