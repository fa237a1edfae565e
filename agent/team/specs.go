package team

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ListTeammateSpecs lists the saved teammate specs, by name.
func (s *Service) ListTeammateSpecs(context.Context, *pb.ListTeammateSpecsRequest) (*pb.ListTeammateSpecsResponse, error) {
	return &pb.ListTeammateSpecsResponse{Specs: s.opt.Store.TeammateSpecs()}, nil
}

// CreateTeammateSpec saves a new teammate spec.
func (s *Service) CreateTeammateSpec(_ context.Context, req *pb.CreateTeammateSpecRequest) (*pb.CreateTeammateSpecResponse, error) {
	t, err := s.opt.Store.CreateTeammate(req.GetSpec())
	if err != nil {
		return nil, specStatus(err, "create teammate spec")
	}
	s.opt.Logger.Info("team: teammate spec created", "spec_id", t.GetId(), "name", t.GetName())
	return &pb.CreateTeammateSpecResponse{Spec: t}, nil
}

// UpdateTeammateSpec changes the fields update_mask names.
func (s *Service) UpdateTeammateSpec(_ context.Context, req *pb.UpdateTeammateSpecRequest) (*pb.UpdateTeammateSpecResponse, error) {
	if req.GetSpec().GetId() == "" {
		return nil, fail(codes.InvalidArgument, server.CodeInvalidArgument, "update teammate spec: spec.id is required")
	}
	t, err := s.opt.Store.UpdateTeammate(req.GetSpec(), req.GetUpdateMask())
	if err != nil {
		return nil, specStatus(err, "update teammate spec")
	}
	s.opt.Logger.Info("team: teammate spec updated", "spec_id", t.GetId(), "name", t.GetName(), "fields", req.GetUpdateMask())
	return &pb.UpdateTeammateSpecResponse{Spec: t}, nil
}

// DeleteTeammateSpec removes a teammate spec.
func (s *Service) DeleteTeammateSpec(_ context.Context, req *pb.DeleteTeammateSpecRequest) (*pb.DeleteTeammateSpecResponse, error) {
	if err := s.opt.Store.DeleteTeammate(req.GetId()); err != nil {
		return nil, specStatus(err, "delete teammate spec")
	}
	s.opt.Logger.Info("team: teammate spec deleted", "spec_id", req.GetId())
	return &pb.DeleteTeammateSpecResponse{}, nil
}

// ListSkillSpecs lists the saved skill specs, by name.
func (s *Service) ListSkillSpecs(context.Context, *pb.ListSkillSpecsRequest) (*pb.ListSkillSpecsResponse, error) {
	return &pb.ListSkillSpecsResponse{Specs: s.opt.Store.SkillSpecs()}, nil
}

// CreateSkillSpec saves a new skill spec.
func (s *Service) CreateSkillSpec(_ context.Context, req *pb.CreateSkillSpecRequest) (*pb.CreateSkillSpecResponse, error) {
	k, err := s.opt.Store.CreateSkill(req.GetSpec())
	if err != nil {
		return nil, specStatus(err, "create skill spec")
	}
	s.opt.Logger.Info("team: skill spec created", "spec_id", k.GetId(), "name", k.GetName(), "skill_type", k.GetSkillType().String())
	return &pb.CreateSkillSpecResponse{Spec: k}, nil
}

// DeleteSkillSpec removes a skill spec no teammate spec names.
func (s *Service) DeleteSkillSpec(_ context.Context, req *pb.DeleteSkillSpecRequest) (*pb.DeleteSkillSpecResponse, error) {
	if err := s.opt.Store.DeleteSkill(req.GetId()); err != nil {
		return nil, specStatus(err, "delete skill spec")
	}
	s.opt.Logger.Info("team: skill spec deleted", "spec_id", req.GetId())
	return &pb.DeleteSkillSpecResponse{}, nil
}
