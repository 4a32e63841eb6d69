package scsi

// prState holds reservation state. PERSISTENT RESERVE IN/OUT and
// RESERVE/RELEASE(6) are not implemented yet: those opcodes answer INVALID
// COMMAND OPERATION CODE, so there is never a reservation to check.
type prState struct{}

func (p *prState) init()                      {}
func (p *prState) reset()                     {}
func (p *prState) nexusLost(nexus string)     {}
func (p *prState) check(r *Request) *Response { return nil }
