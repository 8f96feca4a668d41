// How PipelineStages splits decoder layers (parallel/pipeline_stages.h), without
// processes: contiguous blocks covering every layer once, the first L % p stages one
// layer longer, and a clear refusal for more stages than layers.
#include "aspen/parallel/pipeline_stages.h"

#include <gtest/gtest.h>

#include <string>

#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

TEST(PipelineStages, SevenLayersOverThreeStagesGiveTheFirstStageTheExtraLayer) {
  EXPECT_EQ(stage_layers(7, 3, 0, "test").begin, 0);
  EXPECT_EQ(stage_layers(7, 3, 0, "test").end, 3);
  EXPECT_EQ(stage_layers(7, 3, 1, "test").begin, 3);
  EXPECT_EQ(stage_layers(7, 3, 1, "test").end, 5);
  EXPECT_EQ(stage_layers(7, 3, 2, "test").begin, 5);
  EXPECT_EQ(stage_layers(7, 3, 2, "test").end, 7);
}

TEST(PipelineStages, StagesCoverEveryLayerOnceInOrderWithSizesDifferingByAtMostOne) {
  for (int64_t layers = 1; layers <= 12; ++layers) {
    for (int stages = 1; stages <= layers; ++stages) {
      int64_t next = 0;
      for (int s = 0; s < stages; ++s) {
        const LayerRange range = stage_layers(layers, stages, s, "test");
        EXPECT_EQ(range.begin, next) << layers << " layers, stage " << s << " of " << stages;
        EXPECT_TRUE(range.size() == layers / stages || range.size() == layers / stages + 1);
        next = range.end;
      }
      EXPECT_EQ(next, layers) << layers << " layers over " << stages << " stages";
    }
  }
}

TEST(PipelineStages, RefusesMoreStagesThanLayersAndAStageOutOfRange) {
  try {
    stage_layers(2, 3, 0, "placement.train.pp");
    FAIL() << "3 stages for 2 layers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("placement.train.pp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("each stage needs a layer"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(stage_layers(4, 2, 2, "test"), Error);
  EXPECT_THROW(stage_layers(4, 0, 0, "test"), Error);
}

TEST(PipelineStages, DefaultContextIsOneStageHoldingEverything) {
  const PipelineStages pp;
  EXPECT_FALSE(pp.enabled());
  EXPECT_TRUE(pp.first());
  EXPECT_TRUE(pp.last());
  EXPECT_EQ(pp.layers(5, "test").begin, 0);
  EXPECT_EQ(pp.layers(5, "test").end, 5);
  pp.validate("test");
  PipelineStages without_group;
  without_group.size = 2;
  EXPECT_THROW(without_group.validate("test"), Error);
}

}  // namespace
}  // namespace aspen::parallel
