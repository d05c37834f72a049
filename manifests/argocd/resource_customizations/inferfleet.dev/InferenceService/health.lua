-- Argo CD health check for inferfleet.dev/InferenceService.
-- Maps the operator's status conditions (Planned, CacheReady, Ready, Degraded, SloAtRisk,
-- ModelConfigRead from the reconciler; Scaling, ScalingActive, WorkloadDrift from the autoscaler) to Argo
-- CD health: Progressing while the operator plans, pre-caches and rolls out; Healthy once
-- every tier serves and the front door (the HTTPRoute on the Gateway, the InferencePool's
-- endpoints) can take requests (noting when a tier's plan cannot meet the latency SLOs,
-- or when the traffic has drifted from the declared workload); Degraded when the spec
-- cannot be planned, the reconciler reports a failure, the autoscaler cannot decide
-- (ScalingActive=False: replicas held), the Gateway refuses the route or another route on
-- the Gateway shadows it (takes requests its match covers). Plain Lua 5.1
-- (Argo CD runs gopher-lua).
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

-- A model the catalog lacks, its config.json being read by a probe Job (ModelConfigRead
-- Unknown): its tiers are infeasible until then, which is progress, not a fault.
local model_config = condition("ModelConfigRead")
if model_config ~= nil and model_config.status == "Unknown" then
  hs.status = "Progressing"
  hs.message = "Reading the model's config.json: " .. describe(model_config, "Probing")
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

local scaling_active = condition("ScalingActive")
if scaling_active ~= nil and scaling_active.status == "False" then
  hs.status = "Degraded"
  hs.message = "Autoscaler: " .. describe(scaling_active, "ScalingInactive")
  return hs
end

local front = obj.status.frontDoor
local gateway_mode = front ~= nil and front.mode == "gateway"
local function route_words()
  local text = "route on Gateway " .. (front.gateway or "?")
  if front.routeMessage ~= nil and front.routeMessage ~= "" then
    text = text .. ": " .. front.routeMessage
  end
  return text
end
if gateway_mode and front.route == "NotAccepted" then
  hs.status = "Degraded"
  hs.message = "Front door: the Gateway did not accept the " .. route_words()
  return hs
end
-- Another route on the Gateway takes requests this service's route covers: some of its
-- clients reach someone else, whatever the Gateway says of the route itself.
if gateway_mode and front.route == "Shadowed" then
  hs.status = "Degraded"
  hs.message = "Front door: another route takes this service's requests on the " .. route_words()
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  if gateway_mode and front.route ~= "Accepted" then
    hs.status = "Progressing"
    hs.message = "Front door: waiting for the " .. route_words()
    return hs
  end
  local desired = obj.status.desiredReplicas or 0
  if gateway_mode and (front.endpoints or 0) == 0 and desired > 0 then
    hs.status = "Progressing"
    hs.message = "Front door: the InferencePool has no ready endpoint yet"
    return hs
  end
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  if gateway_mode then
    if desired == 0 then
      hs.message = hs.message .. " (scaled to zero: the front door holds requests while a tier starts)"
    else
      hs.message = hs.message .. " (front door: " .. front.endpoints .. " endpoint(s), route accepted)"
    end
  end
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
