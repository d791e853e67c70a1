package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// registerScheduleRoutes adds the owner's schedules API (docs/SCHEDULES.md):
// GET/POST /api/schedules, PATCH/DELETE /api/schedules/:id.
func (s *Server) registerScheduleRoutes(api *echo.Group) {
	api.GET("/schedules", s.handleListSchedules)
	api.POST("/schedules", s.handleCreateSchedule)
	api.GET("/schedules/:id", s.handleGetSchedule)
	api.PATCH("/schedules/:id", s.handleUpdateSchedule)
	api.DELETE("/schedules/:id", s.handleDeleteSchedule)
}

// scheduleBody is what POST and PATCH take: the request's fields, and on
// PATCH the version the client read.
type scheduleBody struct {
	services.ScheduleRequest
	Version *int `json:"version,omitempty"`
}

func (s *Server) schedules() (services.Schedules, error) {
	if s.opts.Schedules == nil {
		return nil, services.Errorf(services.EUNAVAILABLE, "schedules are not available on this server")
	}
	return s.opts.Schedules, nil
}

// scheduleTarget is the schedules service and the id of the path.
func (s *Server) scheduleTarget(c echo.Context) (services.Schedules, int64, error) {
	sch, err := s.schedules()
	if err != nil {
		return nil, 0, err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, 0, services.Errorf(services.EINVALID, "schedule id %q is not a positive number", c.Param("id"))
	}
	return sch, id, nil
}

func (s *Server) handleListSchedules(c echo.Context) error {
	sch, err := s.schedules()
	if err != nil {
		return err
	}
	fires, err := fireCount(c, 5)
	if err != nil {
		return err
	}
	list, err := sch.List(c.Request().Context(), s.opts.OwnerTimeline, fires)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"schedules": list})
}

func (s *Server) handleCreateSchedule(c echo.Context) error {
	sch, err := s.schedules()
	if err != nil {
		return err
	}
	var body scheduleBody
	if err := decodeJSON(c.Request(), &body); err != nil {
		return err
	}
	if body.Version != nil {
		return services.Errorf(services.EINVALID, "version is for PATCH; a new schedule starts at version 1")
	}
	sc, err := sch.Create(c.Request().Context(), s.opts.OwnerTimeline, body.ScheduleRequest)
	if err != nil {
		return err
	}
	s.audit(c.Request().Context(), services.ScheduleAudit(s.auditChannel(c), "created", sc))
	return c.JSON(http.StatusCreated, sc)
}

// fireCount reads ?fires=N (default def, 0 to 100).
func fireCount(c echo.Context, def int) (int, error) {
	v := c.QueryParam("fires")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 100 {
		return 0, services.Errorf(services.EINVALID, "fires %q: want a number from 0 to 100", v)
	}
	return n, nil
}

// handleGetSchedule answers one schedule with its last fires' receipts
// (?fires=N, default 20).
func (s *Server) handleGetSchedule(c echo.Context) error {
	sch, id, err := s.scheduleTarget(c)
	if err != nil {
		return err
	}
	fires, err := fireCount(c, 20)
	if err != nil {
		return err
	}
	sc, err := sch.GetWithFires(c.Request().Context(), s.opts.OwnerTimeline, id, fires)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sc)
}

func (s *Server) handleUpdateSchedule(c echo.Context) error {
	sch, id, err := s.scheduleTarget(c)
	if err != nil {
		return err
	}
	var body scheduleBody
	if err := decodeJSON(c.Request(), &body); err != nil {
		return err
	}
	if body.Version == nil || *body.Version <= 0 {
		return services.Errorf(services.EINVALID, "version is required: send the version of the schedule you read (GET /api/schedules)")
	}
	sc, err := sch.Update(c.Request().Context(), s.opts.OwnerTimeline, id, *body.Version, body.ScheduleRequest)
	if err != nil {
		return err
	}
	s.audit(c.Request().Context(), services.ScheduleAudit(s.auditChannel(c), scheduleChange(body.ScheduleRequest), sc))
	return c.JSON(http.StatusOK, sc)
}

func (s *Server) handleDeleteSchedule(c echo.Context) error {
	sch, id, err := s.scheduleTarget(c)
	if err != nil {
		return err
	}
	sc, err := sch.Delete(c.Request().Context(), s.opts.OwnerTimeline, id)
	if err != nil {
		return err
	}
	s.audit(c.Request().Context(), services.ScheduleAudit(s.auditChannel(c), "deleted", sc))
	return c.JSON(http.StatusOK, sc)
}

// scheduleChange names an update for the audit trail: a pause or resume
// when the request only changes the state.
func scheduleChange(r services.ScheduleRequest) string {
	if r.State != nil && r.Name == nil && r.Task == nil && r.At == nil && r.Every == nil && r.Cron == nil &&
		r.Notify == nil && r.Timezone == nil && r.Profile == nil && r.Watch == nil {
		if *r.State == string(services.SchedulePaused) {
			return "paused"
		}
		return "resumed"
	}
	return "updated"
}
