// Parameter values and schemas: the messages validate and the executor share.
#include <catch2/catch.hpp>

#include "pipeline/param_check.h"

using namespace accelopt;
using nlohmann::json;

TEST_CASE("values are checked by type and enum, with one message each", "[pipeline][params]") {
  json spec = {{"type", "string"}, {"enum", {"full", "small", "all"}}};
  CHECK_FALSE(CheckParamValue("small", spec));
  CHECK(CheckParamValue("smal", spec) == "must be one of full, small, all, got \"smal\" (did you mean 'small'?)");
  CHECK(CheckParamValue(3, spec) == "must be of type string, got number 3");
  CHECK(CheckParamValue(nullptr, {{"type", "integer"}}) == "must be of type integer, got null null");
  CHECK_FALSE(CheckParamValue(json::array(), json::object()));
  CHECK(ParamProblemMessage("cases", "native:x", "must be of type string, got number 3", "${{ vars.c }}") ==
        "parameter 'cases' of native:x must be of type string, got number 3 (from ${{ vars.c }})");
  CHECK(MissingParamMessage("kernel", "native:profile", "${{ kcase.kernal }}") ==
        "required parameter 'kernel' of native:profile is missing: ${{ kcase.kernal }} resolved to null");
  CHECK(MissingParamMessage("kernel", "native:profile") == "required parameter 'kernel' of native:profile is missing");
}

TEST_CASE("schemas are checked: fields, types, enums and defaults", "[pipeline][params]") {
  CHECK(CheckSchema(json::parse(R"({"a": {"type": "string", "enum": ["x", "y"], "default": "x", "doc": "d"}})"), "params").empty());
  CHECK(CheckSchema(json::parse(R"({"a": {"type": "strng"}})"), "params") ==
        std::vector<std::string>{"params.a.type: must be one of string, integer, number, boolean, array, object, any"});
  CHECK(CheckSchema(json::parse(R"({"a": {"type": "string", "requried": true}})"), "params") ==
        std::vector<std::string>{"params.a.requried: unknown field (did you mean 'required'?) (expected type, required, default, doc, enum, minimum, maximum, path, keys_of)"});
  CHECK(CheckSchema(json::parse(R"({"a": {"type": "string", "enum": []}})"), "params") ==
        std::vector<std::string>{"params.a.enum: must be a non-empty list of the allowed values"});
  CHECK(CheckSchema(json::parse(R"({"a": {"type": "string", "enum": ["x"], "default": "z"}})"), "params") ==
        std::vector<std::string>{"params.a.default: \"z\" is not one of the enum values"});
  CHECK(CheckSchema(json::parse(R"({"a": {"type": "integer", "required": true}})"), "outputs") ==
        std::vector<std::string>{"outputs.a.required: unknown field (expected type, doc, enum)"});
  CHECK(CheckSchema(json::array(), "outputs") == std::vector<std::string>{"outputs must be an object of entries by name"});
}
