// lua/accel_lua.h - umbrella header of the Lua module (namespace accelopt::lua):
// Limits, LuaError, HostHooks and Sandbox (lua/sandbox.h); LoadStageInfo and
// RunStage (lua/stage_script.h); EvaluateExpression and CheckExpressionSyntax
// (lua/expression.h); JSON <-> Lua conversion (lua/convert.h).
#pragma once

#include "lua/convert.h"
#include "lua/expression.h"
#include "lua/sandbox.h"
#include "lua/stage_script.h"
