package pipe

import "testing"

func TestSchedulerPollers(t *testing.T) {
	type receive struct{ got, asked int }
	tests := []struct {
		name     string
		conc     int
		receives []receive
		want     int
	}{
		{name: "an idle pipe polls with one receive", conc: 100, want: 1},
		{name: "full receives double the pollers", conc: 100, receives: []receive{{10, 10}, {10, 10}, {10, 10}}, want: 8},
		{name: "up to one per batch slot", conc: 5, receives: []receive{{10, 10}, {10, 10}, {10, 10}, {10, 10}}, want: 5},
		{name: "a short receive keeps them", conc: 100, receives: []receive{{10, 10}, {10, 10}, {3, 10}}, want: 4},
		{name: "an empty receive halves them", conc: 100, receives: []receive{{10, 10}, {10, 10}, {10, 10}, {0, 10}}, want: 4},
		{name: "never below one", conc: 100, receives: []receive{{0, 10}, {0, 10}}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scheduler{conc: tt.conc, batchSize: 10}
			for _, r := range tt.receives {
				s.received(r.got, r.asked)
			}
			if got := s.want(); got != tt.want {
				t.Errorf("want() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSchedulerRoomCountsWhatIsUnderWay(t *testing.T) {
	s := scheduler{conc: 3, batchSize: 10, pollers: 3}
	steps := []struct {
		name          string
		do            func()
		pending, held int
		room          int
		canReceive    bool
	}{
		{name: "three free slots of ten", room: 30, canReceive: true},
		{name: "a receive of ten under way", do: func() { s.startReceive(10) }, room: 20, canReceive: true},
		{name: "minus what waits for a batch and is held", pending: 4, held: 6, room: 10, canReceive: true},
		{name: "a batch in flight", do: func() { s.receiveDone(10); s.inflight++ }, room: 20, canReceive: true},
		{name: "as many receives as pollers", do: func() { s.startReceive(10); s.startReceive(10); s.startReceive(10) }, room: -10},
		{name: "all back", do: func() { s.receiveDone(10); s.receiveDone(10); s.receiveDone(10); s.inflight-- }, room: 30, canReceive: true},
	}
	for _, st := range steps {
		if st.do != nil {
			st.do()
		}
		if got := s.room(st.pending, st.held); got != st.room {
			t.Errorf("%s: room = %d, want %d", st.name, got, st.room)
		}
		if got := s.canReceive(); got != st.canReceive {
			t.Errorf("%s: canReceive = %v, want %v", st.name, got, st.canReceive)
		}
	}
	if !s.idle(0) || s.idle(1) || !s.slotFree() {
		t.Errorf("after all came back: idle %v, idle with one pending %v, slot free %v; want true, false, true", s.idle(0), s.idle(1), s.slotFree())
	}
	if got := s.probeRoom(); got != 10 {
		t.Errorf("probeRoom = %d, want a batch: 10", got)
	}
}
