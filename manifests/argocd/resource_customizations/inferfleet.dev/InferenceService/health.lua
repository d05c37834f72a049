-- Argo CD health check for inferfleet.dev/InferenceService.
-- Maps the operator's status conditions (Planned, CacheReady, Ready, Scaling, Degraded,
-- SloAtRisk, WorkloadDrift) to Argo CD health: Progressing while the operator plans,
-- pre-caches and rolls out; Healthy once every tier serves (noting when a tier's plan
-- cannot meet the latency SLOs, or when the traffic has drifted from the declared
-- workload); Degraded when the spec cannot be planned or the operator reports a
-- failure. Plain Lua 5.1 (Argo CD runs gopher-lua).
local hs = {}

local function condition(ctype)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  local text = c.reason or fallback
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the inferfleet operator to plan this service"
  return hs
end

local generation = obj.metadata and obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end

local planned = condition("Planned")
if planned ~= nil and planned.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(planned, "NotPlanned")
  return hs
end

local degraded = condition("Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(degraded, "Degraded")
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  local scaling = condition("Scaling")
  if scaling ~= nil and scaling.status == "True" then
    hs.message = hs.message .. " (scaling: " .. describe(scaling, "Scaling") .. ")"
  end
  local slo = condition("SloAtRisk")
  if slo ~= nil and slo.status == "True" then
    hs.message = hs.message .. " (SLO at risk: " .. describe(slo, "SloUnreachable") .. ")"
  end
  local drift = condition("WorkloadDrift")
  if drift ~= nil and drift.status == "True" then
    hs.message = hs.message .. " (workload drift: " .. describe(drift, "WorkloadDrift") .. ")"
  end
  return hs
end

hs.status = "Progressing"
if planned == nil or planned.status ~= "True" then
  hs.message = "Waiting for a plan"
  return hs
end
local cache = condition("CacheReady")
if cache ~= nil and cache.status == "False" then
  hs.message = "Pre-caching model weights: " .. describe(cache, "CacheNotReady")
  return hs
end
if ready ~= nil then
  hs.message = describe(ready, "NotReady")
elseif obj.status.tierSummary ~= nil then
  hs.message = "Waiting for replicas: " .. obj.status.tierSummary
else
  hs.message = "Waiting for replicas"
end
return hs
