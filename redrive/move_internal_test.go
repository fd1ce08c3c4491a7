package redrive

import "testing"

func TestFindMovePicksTheTaskStartedAsTheHandle(t *testing.T) {
	running := MoveTask{TaskHandle: "h1", Status: MoveRunning}
	ended := MoveTask{Status: MoveCompleted, Moved: 3}
	other := MoveTask{TaskHandle: "h2", Status: MoveRunning}
	tests := []struct {
		name   string
		tasks  []MoveTask
		handle string
		want   MoveTask
		found  bool
	}{
		{"the running task with the handle", []MoveTask{running, ended}, "h1", running, true},
		{"once the handle is gone, the newest ended task", []MoveTask{ended, {Status: MoveFailed}}, "h1", ended, true},
		{"another running task is not it", []MoveTask{other, ended}, "h1", MoveTask{}, false},
		{"a running task without a handle is not taken", []MoveTask{{Status: MoveRunning}}, "h1", MoveTask{}, false},
		{"no tasks", nil, "h1", MoveTask{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := findMove(tt.tasks, tt.handle)
			if got != tt.want || found != tt.found {
				t.Errorf("findMove = %+v, %v; want %+v, %v", got, found, tt.want, tt.found)
			}
		})
	}
}
